"""The report's view of ``host_debug:`` cells: each cell's kernel lockup-panic settings next to
what its freezes became.

With ``softlockup_panic``/``hardlockup_panic`` on, a lock the kernel's watchdog sees is a
panic and a reboot (with the panic text) instead of a silent wedge; the plain cells beside
them show whether the freezes were ones the kernel could see at all.
"""

from __future__ import annotations

from html import escape
from typing import Any, Iterable, Mapping, Sequence

from reprofleet.records.reader import RecordedAttempt, attempts_of

HEADERS = ("cell", "host_debug", "attempts", "wedge", "reboot", "reboot with a kernel panic")


def settings_words(factors: Mapping[str, Any] | None) -> str:
    """``softlockup_panic, panic 10 s`` for a cell's host_debug factor; ``host's own`` when unset."""
    debug = (factors or {}).get("host_debug") or {}
    if not debug:
        return "host's own"
    words = [name if value is True else f"{name} off" if value is False else f"{name} {value} s"
             for name, value in sorted(debug.items()) if name != "panic"]
    if "panic" in debug:
        words.append(f"reboot {debug['panic']} s after a panic" if debug["panic"] else "stay hung after a panic")
    return ", ".join(words)


def panic_line(record: RecordedAttempt) -> str | None:
    """The first ``Kernel panic`` line the record's forensics hold (journal of the previous boot or pstore)."""
    findings = list(record.forensics.get("findings") or [])
    for entry in record.forensics.get("pstore") or []:
        findings += entry.get("findings") or []
    for finding in findings:
        if "panic" in (finding.get("tags") or []):
            return str(finding.get("line", ""))
    return None


def rows(records: Iterable[Mapping[str, Any]]) -> list[tuple[str, ...]]:
    """One row per cell, in the order cells first appear; none when no cell set host_debug.
    ``records``: typed, or their JSON lines."""
    attempts = attempts_of(records)
    if not any(r.factors.get("host_debug") for r in attempts):
        return []
    cells: dict[str, list[RecordedAttempt]] = {}
    for record in attempts:
        cells.setdefault(record.cell, []).append(record)
    table: list[tuple[str, ...]] = []
    for cell, mine in cells.items():
        outcomes = [r.outcome for r in mine]
        panics = sum(1 for r in mine if r.outcome == "reboot" and panic_line(r))
        table.append((cell, settings_words(mine[0].factors), str(len(mine)), str(outcomes.count("wedge")),
                      str(outcomes.count("reboot")), str(panics)))
    return table


def markdown_section(records: Sequence[Mapping[str, Any]]) -> list[str]:
    table = rows(records)
    if not table:
        return []
    return ["A lock the kernel's watchdog sees becomes a panic and a reboot in a cell with lockup panics on; "
            "the same freeze in a plain cell is a wedge.", "",
            "| " + " | ".join(HEADERS) + " |", "| --- | --- | ---: | ---: | ---: | ---: |",
            *("| " + " | ".join(row) + " |" for row in table)]


def html_section(records: Sequence[Mapping[str, Any]]) -> str:
    table = rows(records)
    if not table:
        return ""
    head = "".join(f"<th>{escape(h)}</th>" for h in HEADERS)
    body = "".join("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in table)
    return (f"<h3>Kernel lockup panics (host_debug)</h3><p>A lock the kernel's watchdog sees becomes a panic and a "
            f"reboot in a cell with lockup panics on; the same freeze in a plain cell is a wedge.</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def sysctl_commands(factors: Mapping[str, Any] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The sysctl calls that give a host this cell's kernel settings by hand, and the call that
    puts the host's own values back (saved first, in sysctl.conf format)."""
    from reprofleet.runner.host_debug import sysctls
    from reprofleet.model import HostDebug

    debug = (factors or {}).get("host_debug") or {}
    if not debug:
        return (), ()
    wanted = sysctls(HostDebug(**{k: v for k, v in debug.items() if k in HostDebug.__dataclass_fields__}))
    names = sorted(wanted, key=lambda name: (name != "nmi_watchdog", name))  # the NMI watchdog first
    apply = (f"sysctl {' '.join(f'kernel.{n}' for n in names)} > sysctl-before.conf  # the host's own values",
             f"sudo sysctl -w {' '.join(f'kernel.{n}={wanted[n]}' for n in names)}")
    return apply, ("sudo sysctl -p sysctl-before.conf",)
