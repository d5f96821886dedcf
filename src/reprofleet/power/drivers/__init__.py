"""One small module per PDU/BMC protocol; ``power.registry`` maps an inventory's ``driver:`` to them.

Modules: ``tasmota``, ``shelly`` and ``http`` (smart plugs over HTTP), ``snmp`` and
``snmp_oids`` (switched rack PDUs), ``redfish`` and ``ipmi`` (server BMCs), ``pdudaemon``
(an existing pdudaemon), ``command`` (your own commands).
"""
