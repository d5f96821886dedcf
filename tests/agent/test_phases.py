"""The vLLM phase parser against golden logs that follow public bug reports, and its rules."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from reprofleet.model import Phase
from tests.support import agent_harness as h

vllm_phases = h.collector("vllm_phases")
text_lines = h.collector("text_lines")
LOGS = sorted(h.VLLM_LOGS.glob("*.log"))
README = (h.VLLM_LOGS / "README.md").read_text()
# | `fixture` | version | report, URL | seen in the report | `last phase` |
README_ROW = re.compile(r"^\| `(?P<name>[^`]+)` \| (?P<version>[^|]+?) \| (?P<report>.*?https://github\.com/\S+?)"
                        r" \|.*\| `(?P<last>\w+)` \|$", re.MULTILINE)
FROM_NOTES = {"v0.25.1-dflash-v1runner", "v0.33.0-dflash-v2runner", "v0.14.0-dp0-v1runner"}
SOURCES = h.VLLM_LOGS / "sources"
FROM_SOURCES = sorted(table.stem for table in SOURCES.glob("*.tsv"))  # composed from vLLM's own code
TAG = re.compile(r"\[([\w.]+\.py):(\d+)\]")


def golden(log: Path) -> List[Tuple[int, str]]:
    return [(number, phase) for number, phase in json.loads(log.with_suffix(".phases.json").read_text())]


def agent_lines(log: Path) -> List[str]:
    """The log's lines as the host agent hands them to the tracker (\\r ends a line there)."""
    splitter = text_lines.LineSplitter()
    return [text for text, _ in splitter.feed(log.read_bytes(), 0.0) + splitter.flush()]


def readme_rows() -> Dict[str, "re.Match[str]"]:
    return {match["name"]: match for match in README_ROW.finditer(README)}


@pytest.mark.parametrize("log", LOGS, ids=[log.stem for log in LOGS])
def test_each_golden_log_gives_exactly_its_phase_changes(log: Path) -> None:
    assert vllm_phases.phases_of(log.read_text().splitlines()) == golden(log)


@pytest.mark.parametrize("log", LOGS, ids=[log.stem for log in LOGS])
def test_each_golden_log_reads_the_same_as_the_agent_splits_it(log: Path) -> None:
    """Raw ANSI stripped and \\r split by the agent first: the same changes at the same lines."""
    assert vllm_phases.phases_of(agent_lines(log)) == golden(log)


@pytest.mark.parametrize("log", LOGS, ids=[log.stem for log in LOGS])
def test_a_saved_log_with_its_carriage_returns_kept_reads_the_same_phases(log: Path) -> None:
    """A log read whole (split on \\n only), tqdm's \\r redraws still glued: same phase sequence."""
    lines = log.read_bytes().decode("utf-8").split("\n")
    assert [phase for _, phase in vllm_phases.phases_of(lines)] == [phase for _, phase in golden(log)]


def test_at_least_15_golden_logs_follow_public_reports_each_with_a_readme_row_and_url() -> None:
    rows = readme_rows()
    followed = [log.stem for log in LOGS if log.stem not in FROM_NOTES and log.stem not in FROM_SOURCES]
    assert len(followed) >= 15
    assert sorted(rows) == sorted(followed), "every fixture that follows a report has exactly one README row"
    for name, row in rows.items():
        assert re.search(r"#\d+", row["report"]) and "https://github.com/" in row["report"], name
        assert row["version"].strip().startswith("0."), name


@pytest.mark.parametrize("name", sorted(readme_rows()))
def test_the_readme_names_the_last_phase_the_golden_log_reaches(name: str) -> None:
    assert readme_rows()[name]["last"] == golden(h.VLLM_LOGS / (name + ".log"))[-1][1]


def test_the_golden_logs_span_v0_to_the_newest_with_hangs_and_crashes_at_several_phases() -> None:
    names = [log.stem for log in LOGS]
    assert any(name.startswith("v0.7.") for name in names) and any(name.startswith("v0.33.") for name in names)
    hang_or_crash = {golden(h.VLLM_LOGS / (name + ".log"))[-1][1] for name in names
                     if "hang" in name or "crash" in name}
    assert hang_or_crash >= {"model_load", "torch_compile", "flashinfer_autotune", "attention_warmup",
                             "cuda_graph_capture"}


def test_the_logs_composed_from_vllms_sources_cover_0251_0260_and_the_newest_0_3x() -> None:
    versions = {name.split("-")[0] for name in FROM_SOURCES}
    assert {"v0.25.1", "v0.26.0"} <= versions and any(v.startswith("v0.3") for v in versions)
    assert all((h.VLLM_LOGS / (name + ".log")).exists() for name in FROM_SOURCES)


@pytest.mark.parametrize("name", FROM_SOURCES)
def test_every_line_of_a_log_from_the_sources_names_its_version_and_vllm_source_line(name: str) -> None:
    """sources/<name>.tsv, re-derived from the wheels by sources/derive.py (``make test-data``):
    one row per log line, the fixture's version, a ``vllm/...py:LINE``, and that line is the one
    the record's own ``[file.py:LINE]`` tag prints."""
    lines = (h.VLLM_LOGS / (name + ".log")).read_text().splitlines()
    rows = [row.split("\t") for row in (SOURCES / (name + ".tsv")).read_text().splitlines()[1:]]
    assert [int(number) for number, _, _ in rows] == list(range(1, len(lines) + 1))
    for (number, version, source), line in zip(rows, lines):
        assert name.startswith("v" + version) and re.fullmatch(r"vllm/[\w/]+\.py:\d+", source), (number, source)
        tag = TAG.search(line)
        if tag:
            assert source.endswith("/" + tag[1] + ":" + tag[2]), (number, line[:80], source)
        engine = re.search(r"LLM engine \(v([\d.]+)\)", line)
        assert engine is None or engine[1] == version


def test_the_golden_logs_cover_the_three_line_formats_from_the_notes() -> None:
    assert {log.stem for log in LOGS} >= FROM_NOTES


def test_the_parser_speaks_the_controllers_phase_values() -> None:
    assert set(vllm_phases.START_ORDER) == {phase.value for phase in Phase}


def test_the_seeds_freeze_timeline_ends_after_kernel_warmup_with_capture_next() -> None:
    """The seed: ... KV cache sized, autotune starts/ends, attention warm-up, "Skipping
    CuTeDSL warmup" is the last line printed, then the host stops answering. 0.25.1's
    kernel_warmup() runs CuTeDSL last (kernel_warmup.py:129-130), so that line closes the
    warm-ups and capture starts next: the tracker says so instead of filing it under attention."""
    lines = (h.VLLM_LOGS / "v0.25.1-dflash-v1runner.log").read_text().splitlines()
    frozen_at = next(i for i, line in enumerate(lines) if "Skipping CuTeDSL warmup" in line) + 1
    tracker = vllm_phases.PhaseTracker()
    seen = [phase for phase in map(tracker.feed, lines[:frozen_at]) if phase]
    assert seen == ["engine_init", "model_load", "torch_compile", "cuda_graph_capture", "kv_cache",
                    "flashinfer_autotune", "attention_warmup", "kernel_warmup"]
    assert tracker.phase == "kernel_warmup" and tracker.note == "after kernel warmup; capture starts next"
    assert tracker.feed(lines[frozen_at]) == "cuda_graph_capture" and tracker.note == ""


@pytest.mark.parametrize("line, phase", [
    # ANSI raw, written out as text, or with the ESC byte lost in a paste
    ("\x1b[32mINFO\x1b[0m 11-21 16:41:36 [kernel_warmup.py:98] Warming up FlashInfer attention.",
     "attention_warmup"),
    ("\\x1b[36m(EngineCore pid=9)\\x1b[0m INFO 11-21 16:41:24 [gpu_worker.py:395] Available KV cache memory: 9 GiB",
     "kv_cache"),
    ("^[[0;36m(EngineCore_DP0 pid=185)^[[0;0m INFO 02-05 18:02:42 [gpu_model_runner.py:3718] Model loading took "
     "16.81 GiB memory and 8.1 seconds", "model_load"),
    ("[1;36m(VllmWorker rank=0 pid=226)[0;0m INFO 06-12 07:43:51 [monitor.py:34] torch.compile takes 64.49 s in total",
     "torch_compile"),
    # process prefixes across versions, wrappers
    ("myhost: (EngineCore pid=9) INFO 11-21 16:41:24 [gpu_worker.py:395] Available KV cache memory: 9.81 GiB",
     "kv_cache"),
    ("(VllmWorkerProcess pid=12897) INFO 04-23 14:48:46 [model_runner.py:1465] Capturing cudagraphs for decoding. "
     "This may lead to unexpected consequences if the model is not static.", "cuda_graph_capture"),
    ("vllm     | (Worker_TP1_EP1 pid=43) DEBUG 09-13 16:16:38 [compilation/cuda_graph.py:134] Capturing a cudagraph "
     "on (PIECEWISE,BatchDescriptor(num_tokens=2, uniform_decode=False))", "cuda_graph_capture"),
    ("Aug 19 18:34:27 vllm vllm[8727]: (EngineCore pid=8727) INFO 08-19 18:34:27 [gpu_worker.py:563] Available KV "
     "cache memory: 6.87 GiB", "kv_cache"),
    ("(_EngineBackgroundProcess pid=19245) INFO 04-15 10:19:40 executor_base.py:110] # CUDA blocks: 20867, "
     "# CPU blocks: 4096", "kv_cache"),
    ("(ServeReplica:default:vLLM:meta-llama--Llama-3_1-8B-Instruct pid=8753) INFO 2025-06-09 16:23:42,966 "
     "default_vLLM -- Started initializing replica.", None),
    ("[2026-08-21T19:42:37Z] (EngineCore pid=522) INFO 08-21 19:42:37 [gpu_worker.py:396] Using V2 Model Runner",
     "engine_init"),
    # V0 and early-V1 wording, older rank/world-size wording
    ("INFO 02-02 11:50:02 llm_engine.py:232] Initializing a V0 LLM engine (v0.7.1) with config: model='/m'",
     "engine_init"),
    ("runner-1  | INFO 12-20 00:49:35 llm_engine.py:237] Initializing an LLM engine (vdev) with config: model='/m'",
     "engine_init"),
    ("INFO 03-22 18:53:23 [worker.py:267] Memory profiling takes 27.78 seconds", "kv_cache"),
    ("INFO 01-30 03:19:14 kv_cache_utils.py:395] # GPU blocks: 1381", "kv_cache"),
    ("INFO 01-30 03:18:12 gpu_model_runner.py:848] Loading model weights took 67.7229 GB", "model_load"),
    ("INFO 03-21 20:15:44 [monitor.py:33] torch.compile takes 28.77 s in total", "torch_compile"),
    ("INFO 05-13 21:09:39 [parallel_state.py:1004] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, "
     "TP rank 0", "engine_init"),
    ("DEBUG 09-09 15:33:31 [backends.py:124] Directly load the 24-th graph for dynamic shape from inductor",
     "torch_compile"),
    # qualifiers between "Capturing" and "CUDA graph(s)"
    ("Capturing CUDA graph shapes:  26%|██▌       | 9/35 [00:03<00:09,  2.86it/s]", "cuda_graph_capture"),
    ("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  61%|██████    | 41/67", "cuda_graph_capture"),
    ("Capturing dflash CUDA graphs (FULL): 100%|██████████| 35/35", "cuda_graph_capture"),
    ("(EngineCore_DP0 pid=88) INFO 06-02 21:04:55 [backends.py:278] Compiling a graph for dynamic shape "
     "takes 19.35 s", "torch_compile"),
    ("(EngineCore pid=9) INFO 11-21 16:41:25 [kernel_warmup.py:60] Skipping FlashInfer autotune because "
     "it is disabled.", "flashinfer_autotune"),
    ("(EngineCore pid=9) INFO 11-21 16:41:37 [core.py:272] init engine (profile, create kv cache, warmup "
     "model) took 48.21 seconds", "ready"),
    ("INFO 11-21 16:39:57 [scheduler.py:225] Chunked prefill is enabled with max_num_batched_tokens=8192.", None),
    # lines read from 0.26.0 and 0.33/0.34's own sources; their real prefixes
    ("(EngineCore pid=2377) INFO 12-05 14:03:34 [kernel_warmup.py:591] Using FlashInfer managed autotune cache "
     "(root=/root/.cache/vllm/flashinfer_autotune). Pass --disable-flashinfer-autotune to skip autotuning.",
     "flashinfer_autotune"),
    ("(EngineCore_DP0 pid=91) INFO 12-05 14:03:34 [kernel_warmup.py:578] Skipping FlashInfer autotuning for ops "
     "('fp4_gemm',)", "flashinfer_autotune"),
    ("(EngineCore pid=4471) INFO 12-02 09:11:32 [kernel_warmup.py:65] Warming up ll_bf16 router GEMM kernels.",
     "kernel_warmup"),
    ("(EngineCore pid=2377) INFO 12-05 14:03:33 [kernel_warmup.py:213] Warming up BF16x3 router GEMM for K=7168, "
     "M=256.", "kernel_warmup"),
    ("(EngineCore pid=4471) INFO 12-02 09:11:19 [gpu_model_runner.py:6612] Profiling CUDA graph memory: "
     "PIECEWISE=51 (largest=512), FULL=35 (largest=256)", "cuda_graph_capture"),
    ("(MainProcess pid=2210) INFO 12-05 14:02:11 [scheduler.py:354] Chunked prefill is enabled with "
     "max_num_batched_tokens=8192.", None),
    ("(Worker_TP0 pid=114) INFO 07-04 03:10:43 [custom_all_reduce.py:213] Registering 240 cuda graph addresses", None),
    ("Traceback (most recent call last):", None),
])
def test_single_lines_map_to_their_phase(line: str, phase: str | None) -> None:
    assert vllm_phases.phase_of(line) == phase


def test_a_record_glued_to_a_tqdm_bar_is_read_as_its_own_record() -> None:
    """The bar's \\r was lost (or kept): the autotune bar and the warm-up record are both seen."""
    bar = "[AutoTuner]: Tuning fp4_gemm: 100%|██████████| 14/14 [00:03<00:00,  4.30it/s]"
    record = "(EngineCore pid=214) INFO 11-21 09:13:45 [kernel_warmup.py:104] Warming up FlashInfer attention."
    for glue in ("", "\r", "^M"):
        tracker = vllm_phases.PhaseTracker()
        tracker.feed("(EngineCore pid=214) INFO 11-21 09:13:33 [gpu_worker.py:402] Available KV cache memory: 9 GiB")
        assert tracker.feed_all(bar + glue + record) == ["flashinfer_autotune", "attention_warmup"], repr(glue)


@pytest.mark.parametrize("green, reset", [("\x1b[32m", "\x1b[0m"), ("\\x1b[32m", "\\x1b[0m"), ("^[[32m", "^[[0m"),
                                          ("[32m", "[0m")], ids=["raw", "backslash-x1b", "caret", "esc-lost"])
def test_a_coloured_level_glued_to_a_bar_still_starts_a_record(green: str, reset: str) -> None:
    """Without a process prefix the level tag is where a glued record starts; colour around it,
    raw or written out, must not hide that start (else only the later phase would be seen)."""
    bar = "[AutoTuner]: Tuning fp4_gemm: 100%|██████████| 14/14 [00:03<00:00,  4.30it/s]"
    record = green + "INFO" + reset + " 11-21 09:13:45 [kernel_warmup.py:104] Warming up FlashInfer attention."
    tracker = vllm_phases.PhaseTracker()
    tracker.feed("INFO 11-21 09:13:33 [gpu_worker.py:402] Available KV cache memory: 9 GiB")
    assert tracker.feed_all(bar + record) == ["flashinfer_autotune", "attention_warmup"]


def test_a_glued_line_that_enters_two_phases_reports_the_last_to_feed() -> None:
    tracker = vllm_phases.PhaseTracker()
    tracker.feed("INFO [core.py:95] Initializing a V1 LLM engine (v0.33.0) with config: x")
    tracker.feed("Starting torch.compile")
    line = ("Capturing CUDA graphs (FULL): 100%|██████████| 35/35 [00:01<00:00, 25.92it/s]"
            "(EngineCore pid=214) INFO 11-21 09:13:33 [gpu_worker.py:402] Available KV cache memory: 9.84 GiB")
    assert tracker.feed(line) == "kv_cache"
    assert [phase for _, phase in vllm_phases.phases_of(["Initializing a V1 LLM engine (v0.33.0) with config: x",
                                                         "Starting torch.compile", line])] == [
        "engine_init", "torch_compile", "cuda_graph_capture", "kv_cache"]


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


def test_a_capture_before_kv_sizing_is_the_profiles_and_the_one_after_the_warmups_is_kept() -> None:
    lines = ["Initializing a V1 LLM engine (v0.33.0) with config: x", "Starting torch.compile",
             "Capturing CUDA graphs (PIECEWISE):   0%|", "Available KV cache memory: 9 GiB",
             "Warming up FlashInfer attention.", "Capturing CUDA graphs (PIECEWISE):   0%|",
             "init engine (profile, create kv cache, warmup model) took 9 s"]
    assert [phase for _, phase in vllm_phases.phases_of(lines)] == [
        "engine_init", "torch_compile", "cuda_graph_capture", "kv_cache", "attention_warmup", "cuda_graph_capture",
        "ready"]


def test_the_v1_runners_loading_from_scratch_line_keeps_the_v1_order() -> None:
    """0.10 and 0.11's V1 runner also says "Loading model from scratch...": capture still comes last."""
    lines = ["(EngineCore_0 pid=7) INFO 09-14 07:40:18 [core.py:76] Initializing a V1 LLM engine (v0.10.2) with config: x",
             "(EngineCore_0 pid=7) INFO 09-14 07:40:25 [gpu_model_runner.py:2370] Loading model from scratch...",
             "(EngineCore_0 pid=7) INFO 09-14 07:41:17 [gpu_worker.py:298] Available KV cache memory: 52.06 GiB",
             "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/67"]
    assert [phase for _, phase in vllm_phases.phases_of(lines)][-2:] == ["kv_cache", "cuda_graph_capture"]


@pytest.mark.parametrize("log", LOGS, ids=[log.stem for log in LOGS])
def test_the_host_agent_replaying_a_golden_log_reports_its_phases_after_the_lines_that_mark_them(
        log: Path, tmp_path: Path) -> None:
    """Through the real agent (bytes, \\r, raw ANSI and all): one `phase` event per change, right
    after the `log` event of the line that entered it. The machine's own kernel log is left out
    (``--kmsg ""``): a line another process makes the kernel print would land between them."""
    rc, lines, _ = h.run_agent(tmp_path / "state", "run", "--id", "g1", "--timeout", "20", "--sample-hz", "0",
                               "--kmsg", "", "--", "cat", str(log))
    events = h.without_hb(lines)
    assert rc == 0 and events[-1]["k"] == "exit"
    logged = [e["line"] for e in events if e["k"] == "log"]
    assert logged == agent_lines(log)
    phases = [(i, e) for i, e in enumerate(events) if e["k"] == "phase"]
    assert [(e["phase"], e["line"]) for _, e in phases] == [(p, logged[n - 1]) for n, p in golden(log)]
    assert all(events[i - 1]["k"] == "log" and events[i - 1]["line"] == e["line"] for i, e in phases)


def test_the_agent_tells_the_controller_where_the_log_cannot_tell_before_or_inside_capture(tmp_path: Path) -> None:
    """The seed's own start ends on the CuTeDSL line: the agent's last `phase` event says
    kernel_warmup with the note, so the record's phases end on the step before capture."""
    log = h.VLLM_LOGS / "v0.25.1-seed-freeze-after-cutedsl-line.log"
    rc, lines, _ = h.run_agent(tmp_path / "state", "run", "--id", "s1", "--timeout", "20", "--sample-hz", "0",
                               "--kmsg", "", "--", "cat", str(log))
    phases = [e for e in h.without_hb(lines) if e["k"] == "phase"]
    assert rc == 0 and phases[-1]["phase"] == "kernel_warmup"
    assert phases[-1]["note"] == "after kernel warmup; capture starts next"
    assert all("note" not in e for e in phases[:-1])
