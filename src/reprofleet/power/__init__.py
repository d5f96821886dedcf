"""Power control of hosts: one small module per PDU/BMC protocol, a registry keyed by the
inventory's ``pdu: driver:``, and the machinery they share (``base``).

    from reprofleet.power import PowerLog, driver_for
    driver = driver_for(host.pdu, host.name, PowerLog(campaign_dir / "power.jsonl"))
    driver.cycle(dwell_s=10)

Modules: ``base`` (timeouts, retries, read-back, cycles), ``registry`` (``driver:`` -> a
driver), ``ports`` (every host's drivers, built once; a host's cycle and ``switch_on_until``),
``locks`` (one lock per thing a device serialises), ``log`` (power.jsonl), ``control`` (a campaign's power log and device locks, held once), ``options`` (a
``pdu:`` block's options), ``settings`` (a driver's timeouts and retry bounds),
``defaults`` (``invoke.yaml``'s ``power:`` section over the drivers' own), ``device_cycle``
(a cycle the device runs by itself), ``stagger`` (the inrush gate: N "on"s per M seconds
per device), ``wall`` (wall power during attempts), ``plug_behaviour`` (a plug's own behaviour: power-on
state, auto-off, power limit, child lock, judged); packages ``drivers`` (one module per
protocol) and ``bmc_log`` (forensic readers of a BMC's event log).
"""

from __future__ import annotations

from reprofleet.power.base import PowerActionError, PowerDriver, PowerState, TransientPowerError
from reprofleet.power.log import PowerEvent, PowerLog
from reprofleet.power.options import PowerConfigError
from reprofleet.power.registry import DRIVERS, driver_for

__all__ = [
    "DRIVERS", "PowerActionError", "PowerConfigError", "PowerDriver", "PowerEvent", "PowerLog", "PowerState",
    "TransientPowerError", "driver_for",
]
