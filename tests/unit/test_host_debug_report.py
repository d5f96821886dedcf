"""The report shows host_debug cells next to the plain ones: each cell's kernel lockup-panic
settings, and how many of its freezes became reboots carrying a kernel panic."""

from __future__ import annotations

from typing import Any

from reprofleet.model import Judging, Phase
from reprofleet.records.pooling import CampaignInfo, Pool
from reprofleet.report import render_markdown
from reprofleet.report.commands import commands_for
from reprofleet.report.host_debug import html_section, sysctl_commands
from reprofleet.verdicts import judge

PANIC = {"tags": ["panic"], "line": "Kernel panic - not syncing: softlockup: hung tasks"}
LOCKUP = {"tags": ["watchdog"], "line": "watchdog: BUG: soft lockup - CPU#5 stuck for 22s! [VLLM::EngineCor:42]"}
DEBUG = {"softlockup_panic": True, "panic": 10}


def _rec(cell: str, outcome: str, n: int, debug: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    factors: dict[str, Any] = {"cell": cell, **({"host_debug": debug} if debug else {})}
    return {"campaign": "c", "attempt": f"{cell}-{outcome}-{n}", "cell": cell, "host": "ws01", "outcome": outcome,
            "factors": factors, "runtime": {"kind": "docker"}, "started": f"2026-11-29T00:00:{n:02d}Z",
            "last_phase": "cuda_graph_capture", **extra}


def records() -> list[dict[str, Any]]:
    plain = [_rec("plain", "wedge", i, forensics={"findings": [LOCKUP]}) for i in range(3)]
    plain += [_rec("plain", "clean", 3 + i) for i in range(3)]
    panic = [_rec("lockup-panic", "reboot", 10 + i, DEBUG, forensics={"findings": [], "pstore": [
        {"file": "/sys/fs/pstore/dmesg-ramoops-0", "findings": [LOCKUP, PANIC]}]}) for i in range(2)]
    panic += [_rec("lockup-panic", "reboot", 12, DEBUG, forensics={"findings": []})]  # a reset with no panic text
    panic += [_rec("lockup-panic", "clean", 13 + i, DEBUG) for i in range(3)]
    return plain + panic


def test_the_markdown_report_lists_host_debug_cells_with_their_settings_beside_the_plain_ones() -> None:
    recs = records()
    pool = Pool(tuple(recs), {"c": CampaignInfo("c", Judging(at_risk_phase=Phase.CUDA_GRAPH_CAPTURE), "plain",
                                                ("plain", "lockup-panic"))})
    text = render_markdown(judge(pool), recs, "t")
    assert "## Kernel lockup panics (host_debug)" in text
    assert "| plain | host's own | 6 | 3 | 0 | 0 |" in text
    assert "| lockup-panic | softlockup_panic, reboot 10 s after a panic | 6 | 0 | 3 | 2 |" in text


def test_a_report_without_host_debug_cells_has_no_such_section() -> None:
    plain = [r for r in records() if r["cell"] == "plain"]
    assert html_section(plain) == ""
    assert "softlockup_panic, reboot 10 s after a panic" in html_section(records())


def test_the_hand_commands_of_a_host_debug_cell_set_its_sysctls_and_put_the_hosts_own_back() -> None:
    recs = records()
    pool = Pool(tuple(recs), {"c": CampaignInfo("c", Judging(at_risk_phase=Phase.CUDA_GRAPH_CAPTURE), "plain",
                                                ("plain", "lockup-panic"))})
    by_cell = {c.cell: c for c in commands_for(judge(pool), recs)}
    assert by_cell["plain"].kernel == ()
    panic = by_cell["lockup-panic"]
    assert panic.kernel[-1] == "sudo sysctl -w kernel.panic=10 kernel.softlockup_panic=1"
    assert panic.kernel_reset == ("sudo sysctl -p sysctl-before.conf",)
    hard, _ = sysctl_commands({"host_debug": {"hardlockup_panic": True}})
    assert hard[-1] == "sudo sysctl -w kernel.nmi_watchdog=1 kernel.hardlockup_panic=1"  # the watchdog first
