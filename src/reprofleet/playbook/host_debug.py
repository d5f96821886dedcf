"""A cell's ``host_debug:`` factor: which kernel lockup-to-panic sysctls it runs under.

    defaults:
      host_debug: {softlockup_panic: true, panic: 10}
    matrix:
      - name: plain
        host_debug: {softlockup_panic: null}   # null removes a default, like env
      - name: lockup-panic

Merged key by key over ``defaults`` like ``env``. A cell that sets nothing runs with the
host's own values and keeps the cell identity it had before this factor existed.
"""

from __future__ import annotations

from typing import Any

from reprofleet.errors import Location, PlaybookError
from reprofleet.model import HostDebug
from reprofleet.suggest import did_you_mean, line_of

from reprofleet.playbook.document import Doc

HOST_DEBUG_KEYS = tuple(HostDebug.__dataclass_fields__)
SWITCHES = ("softlockup_panic", "hardlockup_panic", "panic_on_oops", "softlockup_all_cpu_backtrace")


def host_debug_values(doc: Doc, mapping: Any, path: str) -> dict[str, tuple[Any, Location]]:
    """Each key checked (None = remove a default), with where it was written."""
    if not isinstance(mapping, dict):
        raise PlaybookError(Location(doc.file, line_of(mapping), path),
                            f"must be a mapping of {', '.join(HOST_DEBUG_KEYS)}")
    checked: dict[str, tuple[Any, Location]] = {}
    for key, value in mapping.items():
        where = doc.at(mapping, key, f"{path}.{key}")
        if key not in HOST_DEBUG_KEYS:
            raise PlaybookError(where, f"unknown key {key!r}{did_you_mean(key, HOST_DEBUG_KEYS)} "
                                       f"(known: {', '.join(HOST_DEBUG_KEYS)})")
        checked[key] = (_checked(key, value, where), where)
    return checked


def _checked(key: str, value: Any, where: Location) -> Any:
    if value is None:
        return None
    if key in SWITCHES:
        if not isinstance(value, bool):
            raise PlaybookError(where, f"must be true or false, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 86400:
        raise PlaybookError(where, "must be whole seconds >= 0 and <= 86400 from a panic to the reboot "
                                   f"(0: the host stays hung), got {value!r}")
    return value


def host_debug_for(values: dict[str, Any]) -> HostDebug:
    return HostDebug(**{key: values[key] for key in HOST_DEBUG_KEYS if values.get(key) is not None})
