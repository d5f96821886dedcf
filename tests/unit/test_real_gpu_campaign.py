"""A whole campaign that ran on a real NVIDIA H200 (tests/fixtures/real_gpu/README.md).

The controller and one observe-only host on one machine, the agent's real supervisor,
NVML telemetry at 10 Hz and the vLLM-phase parser on bench/real_gpu_poc.py's lines (bf16
modules captured as CUDA graphs for 51 batch sizes). These pin that what the real card
produced renders through ``invoke report`` with no GPU, that every record carries the card's
read-back and never a setting, that a freeze figure draws from a real stream, and what the
H200 reports at default for every candidate read of a clock lock.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from reprofleet.model import GpuPolicy
from reprofleet.report.freeze import freeze_svg, load_trace
from reprofleet.runner.gpu_policy import verify
from tests.support.paths import REPO as ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "real_gpu"
(CAMPAIGN,) = sorted((FIXTURES / "campaign").iterdir())


def records() -> list[dict]:
    return [json.loads(line) for line in (CAMPAIGN / "attempts.jsonl").read_text().splitlines()]


def test_the_h200_campaign_renders_through_invoke_report(tmp_path: Path) -> None:
    folder = shutil.copytree(CAMPAIGN, tmp_path / CAMPAIGN.name)
    done = subprocess.run([sys.executable, "-m", "reprofleet", "report", str(folder), "--out", str(tmp_path / "out")],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "out" / "report.html").read_text()
    assert "<h2>Rates per cell and host</h2>" in page and "<h2>How far attempts got</h2>" in page
    assert page.count("<svg") >= 3 and "NVIDIA H200" in page
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "| default (reference) | h200 | 3 | 3 | 0 | 0 | 0 | 0 | 0 |" in markdown


def test_every_record_ran_through_every_start_phase_with_the_cards_read_back_and_real_telemetry() -> None:
    found = records()
    assert len(found) == 3 and {r["outcome"] for r in found} == {"clean"} and {r["cell"] for r in found} == {"default"}
    for record in found:
        assert record["last_phase"] == "ready"
        assert [p for p in record["phases"]][-2:] == ["cuda_graph_capture", "ready"]
        policy = record["policy"]  # observe-only: read, never set
        assert policy["graphics_clocks"] == policy["graphics_clocks_freqs"] == [345, 1980]
        assert policy["power_limit_w"] == 700.0 and policy["persistence"] is True
        telemetry = record["telemetry"]
        assert telemetry["gfx_mhz_peak"] == 1980.0 and telemetry["samples"] > 100 and telemetry["xids"] == []
    events = [json.loads(line)["event"] for line in (CAMPAIGN / "events.jsonl").read_text().splitlines()]
    assert not [e for e in events if e in ("policy_applied", "policy_restored", "policy_restore_failed")]


def test_a_freeze_figure_draws_from_a_real_stream() -> None:
    record = records()[0]
    trace = load_trace(record, CAMPAIGN / record["stream"])
    gfx = next(s for s in trace.series if s.key == "gfx_mhz")
    assert len(gfx.times) > 20 and max(gfx.values) == 1980.0  # the trimmed stream keeps every 4th sample
    assert "cuda_graph_capture" in {band.phase for band in trace.phases}
    assert freeze_svg(trace).lstrip().startswith("<svg")


def test_the_h200_reads_no_lock_at_default_in_every_candidate() -> None:
    agent = json.loads((FIXTURES / "clock-candidates-agent.json").read_text())
    back = agent["agent_readback"]
    assert back["graphics_clocks"] == back["graphics_clocks_freqs"] == [345, 1980]
    assert back["memory_clocks"] == back["memory_clocks_freqs"] == [3201, 3201]
    assert back["clocks_event_reasons"] & 0x2 == 0  # ApplicationsClocksSetting (= UserDefinedClocks) not active
    nvml = json.loads((FIXTURES / "clock-candidates-nvml.json").read_text())
    assert nvml["MinMaxClockOfPState.graphics.NVML_PSTATE_0"] == [345, 1980]
    assert "nvclockmin=345, nvclockmax=1980" in nvml["CurrentClockFreqs"]
    assert nvml["ClkMonStatus"].startswith("ERROR: Not Supported")  # the clock monitor tells nothing here
    smi = (FIXTURES / "nvidia-smi-q-clock-performance.txt").read_text()
    assert "Applications Clocks Setting                    : Not Active" in smi
    problems = verify(GpuPolicy(graphics_clocks=(180, 1500)), back)  # a lock this card does not hold
    assert problems and "asked [180, 1500], GPU reports [345, 1980]" in problems[0]
