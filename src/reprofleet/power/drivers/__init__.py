"""One small module per PDU/BMC protocol; ``power.registry`` maps an inventory's ``driver:`` to them.

Modules: ``tasmota``, ``shelly`` and ``http`` (smart plugs over HTTP), ``tasmota_settings`` and
``shelly_settings`` (their own behaviour, read from their configuration), ``tls_pin`` (a
self-signed device trusted by its certificate's SHA-256 or a CA file), ``snmp``,
``snmp_oids`` and ``snmp_chain`` (switched rack PDUs, daisy-chained ones too), ``snmp_loop``
(the one event loop pysnmp's engines run on), ``redfish``,
``redfish_errors`` (which BMC refusals are retried) and ``ipmi`` (server BMCs),
``pdudaemon`` (an existing pdudaemon), ``command`` (your own commands), ``fence`` and
``fence_agent`` (any ClusterLabs fence agent), ``kasa``, ``kasa_link`` and ``kasa_settings`` (TP-Link Kasa/Tapo
through python-kasa), ``homeassistant`` (a Home Assistant switch entity), ``slurm`` (``scontrol reboot``
where the lab set ``reboot_from_controller``: slurmctld runs its RebootProgram).
"""
