"""A second Ctrl-C never leaves a host switched off: before the process exits, every host
whose outlet this controller switched off (its power log's last switching action for that
outlet is "off", written since this controller started) is switched on again, bounded, and
the exit message says which were and which were not.

The first stop never cuts power (recovery's gate refuses a power action once the campaign is
stopping); the second can arrive in the middle of a cycle's off-dwell, and the host's thread
that would have switched it on does not get to run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from reprofleet.clock import Clock
from reprofleet.errors import ReprofleetError
from reprofleet.power.log import PowerLog
from reprofleet.power.ports import HostPower, switch_on_until

__all__ = ["LEFT_ON_DEADLINE_S", "hosts_left_off", "switch_on_left_off"]

LEFT_ON_DEADLINE_S = 30.0  # per host: the operator pressed Ctrl-C twice and is waiting
SWITCHING = ("on", "off", "cycle")


def hosts_left_off(rows: Iterable[Mapping[str, Any]], since: str) -> list[str]:
    """Hosts with an outlet whose last switching action since ``since`` (ISO time) was "off"
    (``rows``: power.jsonl's lines; a failed "off" may have switched it off too: counted)."""
    last: dict[tuple[str, str, str], str] = {}
    for row in rows:
        action = str(row.get("action"))
        if str(row.get("time", "")) >= since and action in SWITCHING and (action == "off" or row.get("result") != "failed"):
            last[(str(row.get("host")), str(row.get("pdu")), str(row.get("outlet")))] = action
    return sorted({host for (host, _pdu, _outlet), action in last.items() if action == "off"})


def switch_on_left_off(power_of: Callable[[str, PowerLog], HostPower], power_log: Path, since: str, clock: Clock,
                       deadline_s: float = LEFT_ON_DEADLINE_S) -> str | None:
    """Switch on every host this controller left off (``power_of``: a host's outlets, as its
    runner reaches them); one sentence of what happened (None when no host was left off). Each
    host is bounded by ``deadline_s``."""
    log = PowerLog(power_log)
    left = hosts_left_off(log.read(), since)
    if not left:
        return None
    on, still_off = [], []
    for name in left:
        try:
            switch_on_until(power_of(name, log), deadline_s, clock)
            on.append(name)
        except (ReprofleetError, KeyError) as exc:
            still_off.append(f"{name} ({exc})")
    said = f"switched back on before exiting: {', '.join(on)}" if on else ""
    if still_off:
        said += ("; " if said else "") + f"STILL OFF (switch them on by hand): {', '.join(still_off)}"
    return said
