"""`invoke power`: one host's power, by hand, through the same drivers a campaign uses.

Manual actions are logged like a campaign's, to ``reports/manual-power.jsonl``, so the
history of every power action on a host is in one place.
"""

from __future__ import annotations

from pathlib import Path

from .errors import PowerError
from .inventory import load_inventory
from .power import PowerLog, PowerState, driver_for


def power_action(inventory_path: str, host_name: str, action: str, reports: Path, dwell_s: float) -> PowerState:
    inventory = load_inventory(inventory_path)
    host = inventory.host(host_name)
    if host.pdu is None:
        raise PowerError(f"{host_name}: no `pdu:` in the inventory, so reprofleet cannot switch its power")
    reports.mkdir(parents=True, exist_ok=True)
    driver = driver_for(host.pdu, host.name, PowerLog(reports / "manual-power.jsonl"))
    if action == "on":
        return driver.on()
    if action == "off":
        return driver.off()
    if action == "cycle":
        return driver.cycle(dwell_s)
    return driver.status()
