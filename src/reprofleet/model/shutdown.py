"""Was the boot an attempt ran in shut down in an orderly way? Read from a record's forensics.

A person's ``reboot``, unattended-upgrades' automatic reboot or the power button take a host
down the way a lock-up's watchdog reset does, seen from the controller: silence, then a new
boot_id. Only the previous boot's journal tells them apart, and an orderly shutdown is not
the bug reproducing. The agent reads the whole journal (collectors/shutdown_evidence.py, which
names the source of every wording) and says so in ``forensics["shutdown"]``; a record written
before it has only the kernel log's last lines (``tail``) and its findings, where
systemd-shutdown's lines (it logs to /dev/kmsg) and the kernel's reboot line still show. This
module reads both, with the same wordings (``tests/unit/test_shutdown_evidence.py`` holds the two
sides to the same fixtures). A panic anywhere in the evidence is never an orderly shutdown.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Iterable, Mapping

from reprofleet.model.outcomes import Outcome
from reprofleet.model.reasons import ReasonCode
from reprofleet.model.records import Record

STOP_LINES = (
    re.compile(r"\bsystemd-shutdown\[\d+\]: \S"),  # src/shutdown/shutdown.c
    re.compile(r"\bsystemd\[1\]: (?:Reached target (?:(?:reboot|poweroff|halt|kexec|shutdown)\.target - )?"
               r"(?:System )?(?:Reboot(?: via kexec)?|Power[- ]Off|Halt|Shutdown)\.|Shutting down\.)\s*$"),  # src/core
    re.compile(r"\bsystemd-logind\[\d+\]: System is (?:rebooting|powering down|halting|shutting down)"),  # logind-dbus.c
    re.compile(r"\breboot: (?:Restarting system|Power down|System halted)"),  # kernel/reboot.c
)
PANIC = re.compile(r"Kernel panic - not syncing|Rebooting in \d+ seconds")  # kernel/panic.c
UNKNOWN_ASKER = "who asked is not in the journal"


def orderly_shutdown(forensics: Mapping[str, Any] | None) -> str | None:
    """Who shut the host down in an orderly way (words for a reason), or None when the
    forensics show no orderly shutdown, show a panic, or are not there."""
    if not isinstance(forensics, Mapping) or _panicked(forensics):
        return None
    shutdown = forensics.get("shutdown")
    if isinstance(shutdown, Mapping):  # the agent read the whole journal: its word is final
        if shutdown.get("orderly") is not True:
            return None
        by = shutdown.get("by")
        return str(by) if isinstance(by, str) and by else UNKNOWN_ASKER
    lines = [str(line) for line in _listed(forensics.get("tail"))]
    lines += [str(f.get("line")) for f in _listed(forensics.get("findings")) if isinstance(f, Mapping)]
    for line in lines:
        if any(pattern.search(line) for pattern in STOP_LINES):
            return f"{UNKNOWN_ASKER}; the kernel log ends with {line.strip()[-120:]!r}"
    return None


def as_host_shutdown(record: Record) -> Record:
    """A reboot or wedge whose forensics show an orderly shutdown of the boot it ran in is
    ``infra`` with who asked (it runs again, and says nothing of the bug); any other record is
    returned as it is. Watchdog resets and panics stay what they were."""
    who = orderly_shutdown(record.forensics)
    if who is None or record.outcome not in (Outcome.WEDGE, Outcome.REBOOT):
        return record
    return replace(record, outcome=Outcome.INFRA, detect_latency_s=None,
                   reason=ReasonCode.HOST_SHUTDOWN.words(f"{who} (was {record.outcome.value})"))


def _listed(value: Any) -> Iterable[Any]:
    return value if isinstance(value, (list, tuple)) else ()


def _panicked(forensics: Mapping[str, Any]) -> bool:
    findings = [f for f in _listed(forensics.get("findings")) if isinstance(f, Mapping)]
    for record in _listed(forensics.get("pstore")):
        if isinstance(record, Mapping):
            findings += [f for f in _listed(record.get("findings")) if isinstance(f, Mapping)]
    if any("panic" in _listed(f.get("tags")) for f in findings):
        return True
    return any(PANIC.search(str(line)) for line in _listed(forensics.get("tail")))
