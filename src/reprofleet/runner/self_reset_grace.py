"""How long a silent host is given to reset itself before it is power-cycled, from its facts.

Recovery waits ``reboot_grace_s`` before cycling a host that went silent, in case it comes
back by itself: a watchdog reset or a panic reboot is a ``reboot``, not a ``wedge``, and
cutting its power mid-reset would record it as the wrong outcome. On a host that has no way
to reset itself that wait is pure loss, added to every wedge. The facts gathered at prepare
(collectors/self_reset.py) say which ways it has:

* an armed hardware watchdog (``watchdog.armed``);
* a panic that reboots: ``kernel.panic`` != 0;
* a freeze that becomes a panic: ``softlockup_panic``, ``hardlockup_panic`` (with
  ``nmi_watchdog`` on), ``hung_task_panic``;
* a panic that boots a kdump capture kernel, which reboots whatever ``kernel.panic`` says.

The grace is 0 s only when every one of them is known to be closed. A fact the host did not
send, or could not read (an older agent, an ``ipmi_watchdog`` whose BMC timer cannot be
read, an unreadable sysctl), keeps the grace: a skipped grace can misrecord a reboot, a kept
one only costs seconds. The sysctls a ``host_debug`` cell applied for the attempt replace
the host's own values (a lockup-panic cell opens the panic path on a host that has none).
A lockup panic counts as a path even with ``kernel.panic`` = 0: a kdump kernel or the
hypervisor (a VM's pvpanic) may still reset the host, and neither shows in the sysctl.

Decided, and documented: where a panic reboot is the only path, the grace is NOT shortened
to ``kernel.panic`` plus a margin. ``kernel.panic`` counts from the panic, which comes after
the kernel's lockup detector fired (up to 2 x ``watchdog_thresh``, 20 s by default, for a
soft lockup), and after the reset the firmware's POST keeps the host silent for a time the
controller does not know before its kernel answers a probe (only then does the grace extend
to the boot deadline). A grace cut to ``panic`` + a margin would cycle hosts in POST and
record their reboots as wedges. Where detection + ``kernel.panic`` is longer than the grace
itself, the words say so (raise ``reboot_grace_s`` for such hosts); the grace is not
lengthened behind the user's setting.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, Mapping

LOCKUP_PANICS = ("softlockup_panic", "hardlockup_panic", "hung_task_panic")
NO_PATH = "no hardware watchdog, kernel.panic=0, no lockup panics, no kdump"


def sysctls_in_force(facts: Mapping[str, Any] | None,
                     applied: Mapping[str, Any] | None = None) -> tuple[dict[str, int | None], set[str]]:
    """The panic sysctls during the attempt (the host's own from its facts, replaced by what
    a host_debug cell applied), and the ones its kernel does not have."""
    found = (facts or {}).get("panic_sysctls")
    found = found if isinstance(found, Mapping) else {}
    values: dict[str, int | None] = {}
    for name, value in dict(found.get("values") or {}).items():
        values[name] = value if isinstance(value, int) and not isinstance(value, bool) else None
    for name, value in dict(applied or {}).items():
        if isinstance(value, int) and not isinstance(value, bool):
            values[name] = value
    return values, {str(name) for name in found.get("absent") or []}


def _lockup_panics(values: Mapping[str, int | None], absent: set[str]) -> tuple[list[str], list[str]]:
    """(the lockup panics that are on, the ones whose setting is unknown)."""
    on, unknown = [], []
    for name in LOCKUP_PANICS:
        if name in absent:
            continue  # this kernel has no such detector: it cannot panic that way
        value = values.get(name)
        if name == "hardlockup_panic" and values.get("nmi_watchdog") == 0:
            continue  # the hard-lockup detector is off: it never fires
        if value is None:
            unknown.append(name)
        elif value != 0:
            on.append(f"{name}={value}")
    return on, unknown


def _panic_words(panic: int, values: Mapping[str, int | None], on: list[str], default_s: float) -> str:
    words = f"kernel.panic={panic} (reboots {'at once' if panic < 0 else f'{panic} s'} after a panic)"
    thresh = values.get("watchdog_thresh") or 10
    detect = 2 * thresh if any(p.startswith("softlockup") for p in on) else (thresh if on else 0)
    if panic > 0 and detect + panic > default_s:
        words += (f"; a lockup panic's reboot comes up to {detect + panic} s after the freeze, later than this "
                  f"grace (raise reboot_grace_s for this host)")
    return words


def self_reset_grace_s(facts: Mapping[str, Any] | None, default_s: float,
                       applied: Mapping[str, Any] | None = None) -> tuple[float, str]:
    """The grace for a silent host, in seconds, and why (words for the recovery's event).

    ``facts``: the host's facts from prepare; ``applied``: the sysctls a host_debug cell
    read back for the attempt (None without one).
    """
    facts = facts or {}
    values, absent = sysctls_in_force(facts, applied)
    paths: list[str] = []
    unknown: list[str] = []
    watchdog = facts.get("watchdog")
    watchdog = watchdog if isinstance(watchdog, Mapping) else {"why": "the facts do not say"}
    armed = watchdog.get("armed")
    if armed is True:
        paths.append(f"an armed hardware watchdog: {watchdog.get('why')}")
    elif armed is None:
        unknown.append(f"whether a hardware watchdog is armed ({watchdog.get('why')})")
    on, lockups_unknown = _lockup_panics(values, absent)
    panic = values.get("panic")
    if panic is None:
        unknown.append("kernel.panic")
    elif panic != 0:
        paths.append(_panic_words(panic, values, on, default_s))
    if on:
        paths.append("lockup panics on (" + ", ".join(on) + ")")
    unknown += [f"kernel.{name}" for name in lockups_unknown]
    kdump = facts.get("kdump_loaded")
    if kdump is True:
        paths.append("kdump is loaded (a panic boots its capture kernel, which reboots)")
    elif kdump is None:
        unknown.append("whether kdump is loaded")
    if paths:
        return default_s, f"grace {default_s:g} s: " + "; ".join(paths)
    if unknown:
        return default_s, f"grace {default_s:g} s: unknown " + ", ".join(unknown)
    return 0.0, f"grace 0 s: {NO_PATH}"
