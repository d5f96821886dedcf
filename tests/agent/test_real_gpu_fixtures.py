"""What the host agent printed on a real NVIDIA H200 (read-only: no policy was applied).

Captured with the commands in tests/fixtures/real-gpu/README.md. These pin that the
controller parses real agent output, that every sampled NVML field was supported on that
GPU, and that the agent's telemetry summary agrees with the samples it streamed.
"""

from __future__ import annotations

import json
import sys


from reprofleet.remote.agent import parse_event
from reprofleet.runner.attempt import AttemptTrace, classify_exit
from reprofleet.cli.tables import facts_table
from reprofleet.model import EventKind, GpuPolicy, Host, Outcome
from reprofleet.runner.gpu_policy import power_limit_range, verify
from tests.support import paths

FIXTURES = paths.FIXTURES / "real-gpu"
sys.path.insert(0, str(paths.REPO / "collectors"))
import telemetry_summary  # noqa: E402  (host-side module, stdlib only)

SAMPLED_FIELDS = {"gfx_mhz", "sm_mhz", "mem_mhz", "power_w", "power_limit_w", "temp_c", "pstate",
                  "event_reasons", "pcie_gen", "pcie_width", "pcie_replay", "mem_used_bytes", "util_gpu"}


def _line(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text().splitlines()[0])


def _stream() -> list:
    return [parse_event("h200", raw) for raw in (FIXTURES / "sampler-stream.jsonl").read_text().splitlines()]


def test_facts_describe_the_real_gpu() -> None:
    facts = _line("facts.jsonl")
    (gpu,) = facts["gpus"]
    assert gpu["name"] == "NVIDIA H200" and gpu["vbios"] and gpu["uuid"].startswith("GPU-")
    assert gpu["power_limit_w"] == {"default": 700.0, "min": 200.0, "max": 700.0, "current": 700.0, "enforced": 700.0}
    assert gpu["max_clocks_mhz"]["graphics"] == 1980
    assert facts["driver_version"].startswith("580.") and facts["cuda_driver_version"] == "13.0"
    assert facts["nvml"] == "ok"
    assert power_limit_range(Host("h200", "x", gpu_index=0), facts) == (200.0, 700.0)
    assert facts_table({"h200": facts}).row_count == 1


def test_policy_read_back_on_a_card_at_defaults() -> None:
    report = _line("policy-read.jsonl")
    readback = report["readback"]
    assert report["ok"] and readback["power_limit_w"] == 700.0
    assert readback["graphics_clocks"][1] == readback["max_clocks_mhz"]["graphics"]
    assert verify(GpuPolicy(power_limit_w=700), readback) == []
    assert verify(GpuPolicy(graphics_clocks=(180, 1500)), readback)  # no lock on that card


def test_every_sampled_field_was_supported_and_no_notice_was_needed() -> None:
    events = _stream()
    samples = [e.data for e in events if e.kind is EventKind.NVML and "xid" not in e.data]
    assert len(samples) > 250  # ~35 s at 10 Hz
    for sample in samples:
        assert SAMPLED_FIELDS <= set(sample)
    assert not [e for e in events if e.kind is EventKind.NOTICE]
    assert max(s["gfx_mhz"] for s in samples) == 1980 and min(s["gfx_mhz"] for s in samples) < 400


def test_the_exit_summary_agrees_with_the_streamed_samples() -> None:
    events = _stream()
    samples = [dict(e.data) for e in events if e.kind is EventKind.NVML and "xid" not in e.data]
    exit_line = events[-1].data
    assert events[-1].kind is EventKind.EXIT
    recomputed = telemetry_summary.summarize(samples, [], 2800.0, 0.1)
    telemetry = exit_line["telemetry"]
    for key in ("gfx_mhz_peak", "gfx_mhz_mean", "power_w_peak", "temp_c_peak", "event_reasons_seen"):
        assert recomputed[key] == telemetry[key], key
    assert abs(recomputed["samples"] - telemetry["samples"]) <= 2
    assert classify_exit(exit_line, boot_changed=False)[0] is Outcome.CLEAN


def test_the_trace_of_a_real_stream_keeps_the_last_log_line_and_sample() -> None:
    trace = AttemptTrace()
    for event in _stream():
        trace.observe(event)
    assert trace.last_log_line == "gpu_load: done"
    assert trace.last_nvml is not None and trace.exit is not None
    assert trace.next_seq == _stream()[-1].seq + 1


def test_postboot_on_a_host_without_journalctl_says_why() -> None:
    postboot = _line("postboot.jsonl")
    assert postboot["journal_persistent"] is False
    assert postboot["previous_boot"]["available"] is False
    assert "journalctl" in postboot["previous_boot"]["reason"]


def test_a_real_gpu_is_read_through_the_binding_pushed_with_the_agent() -> None:
    """Captured with the host's own pynvml hidden (fixtures/real-gpu/README.md)."""
    facts = json.loads((FIXTURES / "facts-bundled-nvml.jsonl").read_text().splitlines()[0])
    assert facts["nvml_binding"] == "bundled" and facts["nvml"] == "ok"
    assert [g["name"] for g in facts["gpus"]] == ["NVIDIA H200"] and facts["privilege"] == "root"
    policy = json.loads((FIXTURES / "policy-read-bundled-nvml.jsonl").read_text().splitlines()[-1])
    assert policy["ok"] and policy["readback"]["power_limit_w"] == 700.0
    assert policy["readback"]["graphics_clocks"] == [345, 1980]
