"""Power control of hosts: one small module per PDU/BMC protocol, a registry keyed by the
inventory's ``pdu: driver:``, and the machinery they share (``base``).

    from reprofleet.power import PowerLog, driver_for
    driver = driver_for(host.pdu, host.name, PowerLog(campaign_dir / "power.jsonl"))
    driver.cycle(dwell_s=10)
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
