"""``journalctl`` on a simulated host: kernel messages of this boot and, when the journal
is persistent (/var/log/journal exists), of earlier boots; otherwise a previous boot is
"not available", with systemd 252's message and exit status 1. Without ``-k`` it also shows
what userspace logged (rfsim/boots.py ``<index>.journal``: an orderly shutdown's lines), in
time order, as ``<ident>[<pid>]: <message>``.

Supports what post-boot forensics use: ``-k``, ``-b [N|ID]``, ``--list-boots``,
``-o short|short-iso|short-unix|cat``, ``-n N``, ``-t IDENT`` (repeatable: any of them), ``-f``,
``--no-pager``.

Host-side module: standard library only.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

from . import boots, hwio

def journal_persistent() -> bool:
    return Path(os.environ.get("RFSIM_JOURNAL_DIR", "/var/log/journal")).is_dir()


VALUE_FLAGS = {"-b": "boot", "--boot": "boot", "-o": "output", "--output": "output",
               "-n": "lines", "--lines": "lines", "-t": "identifier", "--identifier": "identifier"}
SWITCHES = {"-k": ("kernel",), "--dmesg": ("kernel",), "-f": ("follow",), "--follow": ("follow",),
            "-kf": ("kernel", "follow"), "-fk": ("kernel", "follow"), "--list-boots": ("list-boots",),
            "--no-pager": (), "-q": (), "--quiet": (), "--no-hostname": (), "-a": (), "--all": ()}


def parse(argv: List[str]) -> Dict[str, Optional[str]]:
    """journalctl's forms: ``-b -1``, ``-b`` alone (this boot), ``--boot=ID``, ``-o short-iso``."""
    parsed: Dict[str, Optional[str]] = {}
    args = list(argv)
    while args:
        flag, sep, value = args.pop(0).partition("=")
        if flag in SWITCHES and not sep:
            parsed.update((name, "") for name in SWITCHES[flag])
            continue
        if flag not in VALUE_FLAGS:
            raise ValueError(flag)
        if not sep:
            boot_without_value = flag in ("-b", "--boot") and (not args or (args[0].startswith("-")
                                                                             and not _is_offset(args[0])))
            value = "0" if boot_without_value else args.pop(0)
        if VALUE_FLAGS[flag] == "identifier" and parsed.get("identifier"):
            value = f"{parsed['identifier']},{value}"  # repeated: any of them
        parsed[VALUE_FLAGS[flag]] = value
    return parsed


def _is_offset(text: str) -> bool:
    return text.lstrip("-+").isdigit()


def select_boot(spec: str, known: List[boots.Boot]) -> Optional[boots.Boot]:
    if not known:
        return None
    if _is_offset(spec):
        offset = int(spec)
        position = len(known) - 1 + offset if offset <= 0 else offset - 1
        return known[position] if 0 <= position < len(known) else None
    wanted = spec.replace("-", "").lower()
    return next((b for b in known if b.boot_id.replace("-", "") == wanted), None)


def visible_boots(boots_dir: Path) -> List[boots.Boot]:
    """A volatile journal only knows the running boot."""
    known = boots.all_boots(boots_dir)
    return known if journal_persistent() else known[-1:]


def format_line(boot: boots.Boot, record: Dict[str, object], output: str) -> str:
    stamp = boot.started + int(record["usec"]) / 1e6  # type: ignore[call-overload]
    message = str(record["message"])
    ident = str(record.get("ident") or "kernel")
    source = ident if record.get("pid") is None else f"{ident}[{record['pid']}]"
    if output == "cat":
        return message
    if output == "short-unix":
        prefix = f"{stamp:.6f}"
    elif output == "short-iso":
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(stamp))
    else:
        prefix = time.strftime("%b %d %H:%M:%S", time.localtime(stamp))
    return f"{prefix} {boot.hostname} {source}: {message}"


def list_boots(known: List[boots.Boot]) -> List[str]:
    lines = ["IDX BOOT ID                          FIRST ENTRY                 LAST ENTRY"]
    for position, boot in enumerate(known):
        first = time.strftime("%a %Y-%m-%d %H:%M:%S %Z", time.localtime(boot.started))
        last = time.strftime("%a %Y-%m-%d %H:%M:%S %Z", time.localtime(boot.ended or time.time()))
        lines.append(f"{position - len(known) + 1:>3} {boot.boot_id.replace('-', '')} {first} {last}")
    return lines


def main(argv: List[str]) -> int:
    try:
        parsed = parse(argv)
    except (ValueError, IndexError) as exc:
        sys.stderr.write(f"journalctl: unrecognized option '{exc}'\n")
        return 1
    boots_dir = hwio.hw_dir() / "boots"
    known = visible_boots(boots_dir)
    if "list-boots" in parsed:
        _print(list_boots(known))
        return 0
    spec = parsed.get("boot") or "0"
    boot = select_boot(spec, known)
    if boot is None:
        sys.stderr.write(f"Data from the specified boot ({spec}) is not available: No such boot ID in journal\n")
        return 1
    output = parsed.get("output") or "short"
    records = boots.parse_kmsg((boots_dir / boot.kmsg_name).read_text())
    kernel_seen = len(records)  # -f follows the kernel log from its end
    if "kernel" not in parsed:
        userspace = boots.read_journal(boots_dir / boot.journal_name)
        records = sorted(records + userspace, key=lambda r: int(r["usec"]))  # stable: kernel first at a tie
    if parsed.get("identifier"):
        wanted = set(str(parsed["identifier"]).split(","))
        records = [r for r in records if str(r.get("ident") or "kernel") in wanted]
    if parsed.get("lines"):
        records = records[-int(parsed["lines"] or 10):]
    if not records and "follow" not in parsed:
        _print(["-- No entries --"])
        return 0
    _print([format_line(boot, r, output) for r in records])
    if "follow" in parsed:
        return follow(boot, boots_dir / boot.kmsg_name, kernel_seen, output)
    return 0


FOLLOW_LIMIT_S = 7 * 24 * 3600.0


def follow(boot: boots.Boot, path: Path, seen: int, output: str) -> int:
    """Print records as they are appended until killed (as `journalctl -f` does; a week at most)."""
    deadline = time.monotonic() + FOLLOW_LIMIT_S
    while time.monotonic() < deadline:
        records = boots.parse_kmsg(path.read_text())
        if len(records) > seen:
            _print([format_line(boot, r, output) for r in records[seen:]])
            seen = len(records)
        time.sleep(0.2)
    return 0


def _print(lines: List[str]) -> None:
    for line in lines:
        sys.stdout.write(line + "\n")
    sys.stdout.flush()
