"""The inventory's ``recovery`` ladder and ``nmi_reboot_s``: how a wedged host is brought back.

    ws07:
      recovery: [nmi, cycle]    # an NMI first (a kdump's vmcore), then the AC cut; default [cycle]
      nmi_reboot_s: 420         # after the NMI, wait this long for a new boot (default: timeouts.nmi_reboot)

A separate module because it is one setting with its own rules, checked where it becomes a
setting: a rung we do not know, a rung named twice, an ``nmi`` after ``cycle`` or a ladder
that does not end with ``cycle`` (an NMI that does not panic leaves the host frozen: only a
cycle is sure to bring it back) is one line naming file:line:recovery. Whether the host's
power device can send an NMI is known only once its driver is built: the power preflight
(``power.ports.build_host_power``) refuses ``nmi`` there, naming this setting's line.
"""

from __future__ import annotations

from typing import Any

from reprofleet.errors import InventoryError, Location
from reprofleet.model import RecoveryRung
from reprofleet.suggest import did_you_mean, line_of

from reprofleet.inventory.values import Sourced

VARIABLE = "recovery"
WAIT_VARIABLE = "nmi_reboot_s"
RUNGS = tuple(rung.value for rung in RecoveryRung)
DEFAULT = (RecoveryRung.CYCLE,)
MAX_NMI_WAIT_S = 3600.0  # a kdump of a large machine takes minutes, not hours


def recovery_ladder(item: Sourced | None) -> tuple[RecoveryRung, ...]:
    """The host's ladder from its merged ``recovery`` (absent: ``[cycle]``)."""
    if item is None:
        return DEFAULT
    value = item.value
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise InventoryError(item.where, f"must be a list of rungs ({', '.join(RUNGS)}), e.g. [nmi, cycle]; "
                                         f"got {value!r}")
    rungs: list[RecoveryRung] = []
    for index, entry in enumerate(items):
        rungs.append(_rung(entry, _at(item, value, index)))
    if len(set(rungs)) != len(rungs):
        raise InventoryError(item.where, f"names a rung twice: {[r.value for r in rungs]}")
    if rungs[-1] is not RecoveryRung.CYCLE:
        raise InventoryError(item.where, "must end with cycle: an NMI that does not make the kernel panic leaves "
                                         "the host frozen, and only a power cycle is sure to bring it back")
    return tuple(rungs)


def nmi_reboot_wait(item: Sourced | None) -> float | None:
    """The host's ``nmi_reboot_s`` (absent: None, the playbook's ``timeouts.nmi_reboot``)."""
    if item is None:
        return None
    value = item.value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_NMI_WAIT_S:
        raise InventoryError(item.where, f"must be seconds, more than 0 and at most {MAX_NMI_WAIT_S:g} "
                                         f"(a kdump's write and reboot), got {value!r}")
    return float(value)


def _at(item: Sourced, container: Any, index: int) -> Location:
    line = line_of(container, index) if not isinstance(container, str) else None
    return Location(item.where.file, line or item.where.line, f"{item.where.field or VARIABLE}[{index}]")


def _rung(entry: Any, where: Location) -> RecoveryRung:
    if isinstance(entry, str) and entry.strip().lower() in RUNGS:
        return RecoveryRung(entry.strip().lower())
    hint = did_you_mean(entry, RUNGS) if isinstance(entry, str) else ""
    raise InventoryError(where, f"unknown recovery rung {entry!r}: the rungs are {', '.join(RUNGS)}{hint}")
