"""The vLLM phase parser against hand-written golden logs, and the tracker's rules."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
import agent_harness as h  # noqa: E402

from reprofleet.model import Phase  # noqa: E402

vllm_phases = h.collector("vllm_phases")
LOGS = sorted(h.VLLM_LOGS.glob("*.log"))


@pytest.mark.parametrize("log", LOGS, ids=[log.stem for log in LOGS])
def test_each_golden_log_gives_exactly_its_phase_changes(log: Path) -> None:
    golden = [tuple(pair) for pair in json.loads(log.with_suffix(".phases.json").read_text())]
    assert vllm_phases.phases_of(log.read_text().splitlines()) == golden


def test_the_golden_logs_cover_the_three_line_formats() -> None:
    assert {log.stem for log in LOGS} >= {"v0.25.1-dflash-v1runner", "v0.33.0-dflash-v2runner",
                                          "v0.14.0-dp0-v1runner"}


def test_the_parser_speaks_the_controllers_phase_values() -> None:
    assert set(vllm_phases.V1_ORDER) == {phase.value for phase in Phase}
    assert set(vllm_phases.V2_ORDER) == set(vllm_phases.V1_ORDER)
    assert vllm_phases.V1_ORDER == tuple(phase.value for phase in Phase)


def test_the_seeds_freeze_timeline_ends_in_attention_warmup_with_the_cutedsl_line_last() -> None:
    """The seed: ... KV cache sized, autotune starts/ends, attention warm-up, "Skipping
    CuTeDSL warmup" is the last line printed, then the host stops answering."""
    lines = (h.VLLM_LOGS / "v0.25.1-dflash-v1runner.log").read_text().splitlines()
    frozen_at = next(i for i, line in enumerate(lines) if "Skipping CuTeDSL warmup" in line) + 1
    tracker = vllm_phases.PhaseTracker()
    seen = [phase for phase in map(tracker.feed, lines[:frozen_at]) if phase]
    assert seen == ["engine_init", "model_load", "torch_compile", "kv_cache", "flashinfer_autotune",
                    "attention_warmup"]
    assert tracker.phase == "attention_warmup"


@pytest.mark.parametrize("line, phase", [
    ("\x1b[32mINFO\x1b[0m 11-21 16:41:36 [kernel_warmup.py:98] Warming up FlashInfer attention.",
     "attention_warmup"),
    ("myhost: (EngineCore pid=9) INFO 11-21 16:41:24 [gpu_worker.py:395] Available KV cache memory: 9.81 GiB",
     "kv_cache"),
    ("(EngineCore pid=9) DEBUG 11-21 16:41:40 [compilation/cuda_graph.py:134] Capturing a cudagraph on "
     "(PIECEWISE,BatchDescriptor(num_tokens=1, uniform_decode=False))", "cuda_graph_capture"),
    ("(EngineCore_DP0 pid=88) INFO 06-02 21:04:55 [backends.py:278] Compiling a graph for dynamic shape "
     "takes 19.35 s", "torch_compile"),
    ("(EngineCore pid=9) INFO 11-21 16:41:25 [kernel_warmup.py:60] Skipping FlashInfer autotune because "
     "it is disabled.", "flashinfer_autotune"),
    ("(EngineCore pid=9) INFO 11-21 16:41:37 [core.py:272] init engine (profile, create kv cache, warmup "
     "model) took 48.21 seconds", "ready"),
    ("INFO 11-21 16:39:57 [scheduler.py:225] Chunked prefill is enabled with max_num_batched_tokens=8192.",
     None),
    ("Traceback (most recent call last):", None),
])
def test_single_lines_map_to_their_phase(line: str, phase: str | None) -> None:
    assert vllm_phases.phase_of(line) == phase


def test_the_tracker_reports_a_phase_once_and_never_goes_back() -> None:
    tracker = vllm_phases.PhaseTracker()
    assert tracker.feed("INFO [core.py:95] Initializing a V1 LLM engine (v0.25.1) with config: x") == "engine_init"
    assert tracker.feed("INFO [backends.py:623] Dynamo bytecode transform time: 5.12 s") == "torch_compile"
    assert tracker.feed("INFO [monitor.py:34] torch.compile took 24.70 s in total") is None
    assert tracker.feed("INFO [gpu_model_runner.py:2903] Model loading took 1 GiB memory and 2 seconds") is None
    assert tracker.phase == "torch_compile"


def test_a_new_engine_start_begins_again_after_ready() -> None:
    tracker = vllm_phases.PhaseTracker()
    start = "INFO [core.py:95] Initializing a V1 LLM engine (v0.25.1) with config: x"
    for line in (start, "Starting to load model /m...", "init engine (profile, create kv cache, warmup model) took 3 s"):
        tracker.feed(line)
    assert tracker.phase == "ready"
    assert tracker.feed(start) == "engine_init"
    assert tracker.feed("Starting to load model /m...") == "model_load"


def test_a_capture_before_kv_sizing_means_the_v2_order_even_without_its_banner() -> None:
    lines = ["Initializing a V1 LLM engine (v0.33.0) with config: x", "Starting torch.compile",
             "Capturing CUDA graphs (PIECEWISE):   0%|", "Available KV cache memory: 9 GiB",
             "Warming up FlashInfer attention.", "init engine (profile, create kv cache, warmup model) took 9 s"]
    assert [phase for _, phase in vllm_phases.phases_of(lines)] == [
        "engine_init", "torch_compile", "cuda_graph_capture", "kv_cache", "attention_warmup", "ready"]
