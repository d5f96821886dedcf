"""The tables `invoke facts` and `invoke policy` print: one row per host, failures as rows.

Every value here is a host's (facts, read-backs, doctor findings): each cell is drawn as text
(cli/terminal_text.py), so a ``[/]`` in a kernel string is shown, not parsed."""

from __future__ import annotations

from typing import Any, Mapping

from rich.table import Table
from rich.text import Text

from reprofleet.cli.progress import host_table, pair, shown
from reprofleet.cli.terminal_text import cell
from reprofleet.errors import ReprofleetError


def _gpu_line(facts: Mapping[str, Any]) -> str:
    gpus = facts.get("gpus") or []
    if not gpus:
        return f"no GPU via NVML ({facts.get('nvml')})"
    first = gpus[0]
    limits = first.get("power_limit_w") or {}
    return (f"{len(gpus)}x {shown(first.get('name'))} vbios {shown(first.get('vbios'))} "
            f"pl {shown(limits.get('current'), 'W')} [{shown(limits.get('min'))}-{shown(limits.get('max'))}]")


def facts_table(results: Mapping[str, Mapping[str, Any] | ReprofleetError]) -> Table:
    def row(facts: Mapping[str, Any]) -> list[str | Text]:
        dmi = facts.get("dmi") or {}
        journal = facts.get("journal_persistent")
        return [_gpu_line(facts), pair(facts.get("driver_version"), facts.get("cuda_driver_version")),
                shown(facts.get("kernel")), pair(dmi.get("board_name"), dmi.get("bios_version")),
                shown(facts.get("boot_id"))[:8],
                cell("volatile", "yellow") if journal is False else shown(None if journal is None else "persistent")]

    return host_table("host facts", ("GPU", "driver / CUDA", "kernel", "board / BIOS", "boot_id", "journal"),
                      results, row)


def policy_table(results: Mapping[str, Mapping[str, Any] | ReprofleetError]) -> Table:
    def row(readback: Mapping[str, Any]) -> list[str | Text]:
        return [shown(readback.get("graphics_clocks")), shown(readback.get("memory_clocks")),
                shown(readback.get("power_limit_w"), " W"), shown(readback.get("persistence")),
                shown(readback.get("application_clocks")), _panics(readback.get("host_debug"))]

    return host_table("GPU policy (read back through NVML)",
                      ("graphics clocks", "memory clocks", "power limit", "persistence", "app clocks",
                       "kernel (host_debug)"), results, row)


def _panics(sysctls: Mapping[str, Any] | None) -> str:
    """``softlockup_panic=1 panic=10``: the lockup-to-panic sysctls that are on (``off`` when none)."""
    if not sysctls:
        return shown(None)
    on = [f"{name}={value}" for name, value in sysctls.items() if value]
    return " ".join(on) or "off"


DOCTOR_STYLE = {"ok": "green", "missing": "bold red", "warn": "yellow", "unknown": "dim"}


def doctor_table(diagnosis: Any) -> Table:
    """One host's doctor items: status, what was found, and the fix for what is not ok."""
    title = Text(f"{cell(diagnosis.host)}: {'ready' if diagnosis.ready else 'NOT READY'}")
    table = Table(title=title, title_justify="left", expand=False)
    for column in ("item", "status", "found", "fix"):
        table.add_column(column, overflow="fold")
    for check in diagnosis.checks:
        style = DOCTOR_STYLE.get(check.status.value, "")
        table.add_row(cell(check.item), cell(check.status.value, style), cell(check.found), cell(check.fix))
    return table
