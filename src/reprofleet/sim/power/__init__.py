"""Power simulators that speak the real protocols, wired to simulated hosts' switches.

Each simulated host's power switch is the file ``<host>/hw/power`` (``on``/``off``); the
fleet's hardware daemon boots or kills the host when it changes. A simulator here flips
that file when a real client switches its outlet, and reports the outlet's state from it:

- ``HttpPlugServer``: Tasmota (with its Backlog), Shelly Gen1 and Gen2 HTTP APIs (our own stdlib server);
- ``SnmpPdu``: our pysnmp agent serving APC rPDU/rPDU2/sPDU and Raritan PX outlets from the MIBs
  (``pdu_mibs``), reboot durations and daisy-chained APC PDUs included;
- ``RedfishBmc``: sushy-tools' emulator (fake driver, its reset delay bounded by ``sushy_launch``),
  one system per host, plus a watcher and a front that adds a metered chassis Power, a SEL log
  service and real BMCs' latency, 409s, POST refusals, PowerCycle and self-signed TLS
  (``redfish_front``, ``redfish_quirks``);
- ``IpmiBmc``: OpenIPMI's ipmi_sim, one per host, whose chassis control is the switch, with a
  SEL that ``ipmi_sel`` fills as the host's power changes and when it wedges (no DCMI power),
  and a latency relay (``udp_delay``) where a slow BMC is wanted;
- ``PdudaemonServer``: the real pdudaemon with a localcmdline PDU writing the switches;
- in this process, on a thread (tests and benches drive them directly): ``plug_kasa`` (TP-Link
  Kasa/Tapo plugs and strips on the legacy XOR protocol and on KLAP, from the protocols' write-ups
  in ``kasa_wire``) and ``plug_homeassistant`` (Home Assistant's REST API for switch entities), with
  the consumer plugs' own faults (``plug_faults``: an overload trip, a switch from the vendor's app).

Every one binds 127.0.0.1 on a free port, records the PIDs it starts, waits for
readiness with a deadline, and stops by PID (also from another process:
``stop_simulator(workdir)``). ``pdu_block(outlet)`` gives the inventory
``pdu:`` mapping that points a host at it; ``power_port(outlet)`` the same as a PowerPort.
"""

from __future__ import annotations

from .daemons import PowerSim, stop_simulator
from .http_plug import HttpPlugServer
from .ipmi_bmc import IpmiBmc
from .pdudaemon_server import PdudaemonServer
from .redfish_bmc import RedfishBmc
from .snmp_pdu import SnmpPdu
from .switch import Outlets, read_switch, write_switch

__all__ = ["HttpPlugServer", "IpmiBmc", "Outlets", "PdudaemonServer", "PowerSim", "RedfishBmc", "SnmpPdu",
           "read_switch", "stop_simulator", "write_switch"]
