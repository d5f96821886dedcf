"""The Markdown report: rates with intervals, the reference comparison, every wedge's last moments."""

from __future__ import annotations

from reprofleet.model import Outcome
from reprofleet.report import render_markdown


def _rec(cell: str, host: str, outcome: str, **extra: object) -> dict:
    return {"cell": cell, "host": host, "outcome": outcome, "started": "2026-11-29T00:00:00Z", **extra}


def test_report_pins_rates_comparison_and_wedge_details() -> None:
    records = [_rec("default", "ws01", "wedge", last_phase="attention_warmup", detect_latency_s=8.1,
                    last_log_line="Skipping CuTeDSL warmup because no compile units were requested.",
                    forensics={"journal_persistent": True, "previous_boot_available": True, "findings": []})
               for _ in range(4)]
    records += [_rec("default", "ws01", "clean") for _ in range(2)]
    records += [_rec("lgc-2800", "ws01", "clean") for _ in range(6)]
    records += [_rec("lgc-2800", "ws01", "infra", reason="interrupted: the campaign was stopped")]
    text = render_markdown(records, (Outcome.WEDGE,), "t")
    assert "| default | ws01 | 6 | 2 | 0 | 0 | 4 | 0 | 0 | 67% (4/6) |" in text
    assert "| lgc-2800 | ws01 | 6 | 6 | 0 | 0 | 0 | 0 | 1 | 0% (0/6) | 0%–46% |" in text
    assert "| lgc-2800 | 0/6 | 0.0606 | rate above 39% (95%) |" in text
    assert "Skipping CuTeDSL warmup" in text and "8.1 s" in text and "no Xid/NVRM/AER/MCE/watchdog line" in text
    assert "1× interrupted: the campaign was stopped" in text


def test_a_volatile_journal_is_called_out() -> None:
    records = [_rec("default", "ws02", "wedge", forensics={"journal_persistent": False})]
    assert "journal not persistent: nothing survived" in render_markdown(records, (Outcome.WEDGE,), "t")
