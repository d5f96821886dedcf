"""`postboot`: what the previous boot left behind, read after a wedge and a power cycle.

The seed's freeze left nothing (no Xid, NVRM, AER, MCE, watchdog); saying so with
evidence ("the previous boot's kernel log is available and has no findings") is as much
a result as a finding. Sources: the persistent journal's kernel log of boot -1, and
pstore (what the kernel wrote to firmware-backed storage as it died). The previous boot's
whole journal says whether it was shut down in an orderly way, and who asked
(shutdown_evidence.py): a person's ``reboot`` or an automatic upgrade's is not the bug.
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

import attempt_state as state
import host_facts
import shutdown_evidence
from kernel_log import tags_of

PSTORE_DIR = "/sys/fs/pstore"
# systemd-pstore (on by default in Ubuntu) moves each record here at boot, one folder per record,
# and removes it from /sys/fs/pstore: a panic's text is only here once the host is back.
PSTORE_ARCHIVE_DIR = "/var/lib/systemd/pstore"
FINDING_TAGS = ("xid", "nvrm", "aer", "mce", "watchdog", "hung_task", "panic", "oops")
JOURNAL_TIMEOUT_S = 30.0
TAIL_LINES = 50
MAX_FINDINGS = 200
MAX_PSTORE_BYTES = 1 << 20


def extract_findings(lines: Iterable[str], limit: int = MAX_FINDINGS) -> List[Dict[str, Any]]:
    """Lines that carry a failure signature, with their tags (pure; first `limit` only)."""
    findings: List[Dict[str, Any]] = []
    for line in lines:
        tags = [tag for tag in tags_of(line) if tag in FINDING_TAGS]
        if tags:
            findings.append({"tags": tags, "line": line})
            if len(findings) >= limit:
                break
    return findings


def previous_boot_journal(boot: str = "-1") -> Tuple[Optional[List[str]], Optional[str]]:
    """The kernel log of boot -1 (or of the boot ``boot`` names) as lines, or (None, why not)."""
    argv = ["journalctl", "-k", "-b", boot, "-o", "short-iso", "--no-pager"]
    try:
        result = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, timeout=JOURNAL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, "journalctl timed out after %gs" % JOURNAL_TIMEOUT_S
    except OSError as exc:
        return None, "journalctl: %s" % exc
    if result.returncode != 0:
        return None, result.stderr.decode("utf-8", "replace").strip() or "journalctl exit %d" % result.returncode
    lines = result.stdout.decode("utf-8", "replace").splitlines()
    return [line for line in lines if line.strip() and line.strip() != "-- No entries --"], None


def previous_boot(pstore_records: Iterable[Dict[str, Any]] = (), boot: str = "-1") -> Dict[str, Any]:
    """The previous boot's kernel log (findings, tail) and how it ended (``shutdown``); a panic
    in it or in ``pstore_records`` is never an orderly shutdown."""
    lines, reason = previous_boot_journal(boot)
    pstore_panic = any("panic" in f.get("tags", ()) for r in pstore_records for f in r.get("findings", ()))
    if lines is None:
        shutdown = shutdown_evidence.previous_boot((), pstore_panic, boot)
        return {"available": False, "reason": reason, "lines": 0, "findings": [], "tail": [], "shutdown": shutdown}
    findings = extract_findings(lines)
    panicked = pstore_panic or any("panic" in tags_of(line) for line in lines)  # all of it: findings are capped
    return {"available": True, "lines": len(lines), "findings": findings, "tail": lines[-TAIL_LINES:],
            "shutdown": shutdown_evidence.previous_boot(lines, panicked, boot)}


def pstore(directory: str = PSTORE_DIR) -> List[Dict[str, Any]]:
    """Each pstore file (dmesg-ramoops-N, dmesg-efi-..., console-ramoops) with findings."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    records: List[Dict[str, Any]] = []
    for name in names:
        path = os.path.join(directory, name)
        try:
            with open(path, "rb") as handle:
                text = handle.read(MAX_PSTORE_BYTES).decode("utf-8", "replace")
        except OSError as exc:
            records.append({"file": path, "error": str(exc), "findings": []})
            continue
        lines = text.splitlines()
        records.append({"file": path, "lines": len(lines), "findings": extract_findings(lines),
                        "tail": lines[-TAIL_LINES:]})
    return records


def archived_pstore(directory: str = PSTORE_ARCHIVE_DIR) -> List[Dict[str, Any]]:
    """Records systemd-pstore archived during this boot (so: written by the previous one)."""
    try:
        with open("/proc/uptime") as handle:
            since = time.time() - float(handle.read().split()[0]) - 60.0
        folders = sorted(os.path.join(directory, name) for name in os.listdir(directory))
    except (OSError, TypeError, ValueError):
        return []
    records: List[Dict[str, Any]] = []
    for folder in folders:
        try:
            fresh = os.path.isdir(folder) and os.stat(folder).st_mtime >= since
        except OSError:
            continue
        if fresh:
            records += pstore(folder)
    return records


def boot_selector(boot_id: Optional[str]) -> str:
    """journalctl's ``-b`` value: the boot an attempt ran in (its id, 32 hex digits, dashes
    dropped), or -1 when the controller does not know it. Anything else is refused: it goes on
    journalctl's command line."""
    if boot_id is None:
        return "-1"
    plain = boot_id.replace("-", "").lower()
    if len(plain) != 32 or any(c not in "0123456789abcdef" for c in plain):
        raise ValueError("--boot must be a boot id (32 hex digits), not %r" % boot_id)
    return plain


def collect(pstore_dir: str = PSTORE_DIR, boot_id: Optional[str] = None) -> Dict[str, Any]:
    """What the boot an attempt ran in left (``boot_id``; boot -1 when not given)."""
    boot = boot_selector(boot_id)
    try:
        persistent: Optional[bool] = host_facts.journal_persistent(
            host_facts.journald_storage(host_facts.journald_texts()), os.path.isdir("/var/log/journal"))
    except OSError:
        persistent = None
    records = pstore(pstore_dir) + archived_pstore()
    return {"k": "postboot", "boot_id": state.read_boot_id(), "journal_persistent": persistent,
            "previous_boot": previous_boot(records, boot), "pstore": records}
