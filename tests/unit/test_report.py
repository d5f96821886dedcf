"""The Markdown report: rates by role, the reference comparison, every wedge's last moments."""

from __future__ import annotations

import re

from typing import Any

from reprofleet.model import Judging, Phase
from reprofleet.records.pooling import CampaignInfo, Pool
from reprofleet.report import render_markdown
from reprofleet.verdicts import judge


def _rec(cell: str, host: str, outcome: str, **extra: Any) -> dict[str, Any]:
    return {"campaign": "c", "attempt": f"{cell}-{host}-{outcome}-{len(extra)}-{id(extra)}", "cell": cell,
            "host": host, "outcome": outcome, "factors": {"cell": cell}, "runtime": {"kind": "docker"},
            "started": "2026-11-29T00:00:00Z", "last_phase": extra.pop("last_phase", "ready"), **extra}


def _report(records: list[dict[str, Any]]) -> str:
    judging = Judging(at_risk_phase=Phase.CUDA_GRAPH_CAPTURE)
    pool = Pool(tuple(records), {"c": CampaignInfo("c", judging, "default", ("default", "lgc-2800"))})
    return render_markdown(judge(pool), records, "t")


def test_report_pins_rates_comparison_and_wedge_details() -> None:
    records = [_rec("default", "ws01", "wedge", last_phase="attention_warmup", detect_latency_s=8.1,
                    last_log_line="Skipping CuTeDSL warmup because no compile units were requested.",
                    forensics={"journal_persistent": True, "previous_boot_available": True, "findings": []})
               for _ in range(4)]
    records += [_rec("default", "ws01", "clean") for _ in range(2)]
    records += [_rec("lgc-2800", "ws01", "clean") for _ in range(6)]
    records += [_rec("lgc-2800", "ws01", "infra", reason="interrupted: the campaign was stopped")]
    text = _report(records)
    # columns: judged, the seven outcomes (power_loss included), error/hang at risk, excluded, not run, the rate, its interval
    assert "| default (reference) | ws01 | 6 | 2 | 0 | 0 | 4 | 0 | 0 | 0 | 0 | 0 | 0 | 67% (4/6) |" in text
    assert "| lgc-2800 | ws01 | 6 | 6 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 1 | 0% (0/6) | 0%–46% |" in text
    assert "95% two-sided exact" in text
    assert ("| lgc-2800 | reproduces less often than default, if at all: 0/6 against 4/6 on ws01, rate ratio ≤ 0.54 "
            "(95% one-sided, Miettinen-Nurminen score bound, exact unconditional score test at the threshold; rarer: p = 0.011") in text
    assert re.search(r"\| lgc-2800 \| ws01 \| Boschloo exact \(less\) on ws01 \| 0\.0105 \| 0\.0105 \| 0\.54 \| 0\.[2-4]\d* \| — \| — \|", text)  # the exact test's p (the score's 0.18 was too small)
    assert "Skipping CuTeDSL warmup" in text and "8.1 s" in text and "no Xid/NVRM/AER/MCE/watchdog line" in text
    assert "## Slots not run" in text and "- 1× `interrupted: the campaign was stopped`" in text  # a reason: a code span


def test_a_volatile_journal_is_called_out() -> None:
    records = [_rec("default", "ws02", "wedge", forensics={"journal_persistent": False})]
    assert "journal not persistent: nothing survived" in _report(records)


def test_the_excluded_attempts_are_counted_in_a_sensitivity_line_not_dropped() -> None:
    records = [_rec("default", "ws01", "wedge") for _ in range(2)] + [_rec("default", "ws01", "clean") for _ in range(2)]
    records += [_rec("default", "ws01", "infra", reason="the agent's supervisor vanished without recording an exit")]
    text = _report(records)
    assert "- `default`: 50% (2/4) now; 40% (2/5) to 60% (3/5) with the 1 excluded" in text
