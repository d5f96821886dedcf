"""Which phase of a vLLM engine start a log line marks (pure: no I/O).

Fragments come from the design notes (vLLM 0.11 .. 0.33) and from engine starts printed in
public bug reports from 0.7 on (tests/fixtures/vllm-logs/README.md names them). Matching is
on fragments anywhere in a record, so what comes before the message does not matter: the
process prefix (``(EngineCore_DP0 pid=N)``, ``(VllmWorkerProcess pid=N)``, ``(VllmWorker
rank=0 pid=N)``, ``(Worker_TP0 pid=N)``, none), a ``VLLM_LOGGING_PREFIX``, a DEBUG tag with a
path (``[v1/worker/gpu_model_runner.py:2641]``), the 0.7 tag without its opening bracket, or a
wrapper (docker-compose ``vllm-1  | ``, journald ``Aug 19 18:34:27 host vllm[8727]: ``, Ray
``(ServeReplica:app:LLMServer pid=N)``, a CI timestamp).

Two things are undone before matching, because they hide or merge records:

* ANSI colour, raw (ESC bytes) or written out as text (``\\x1b[36m``, ``^[[36m``, or ``[36m``
  once the ESC byte was lost when the log was pasted).
* Several records on one line: tqdm redraws its bar with a carriage return (raw, or written
  out as ``^M``), so the next log record is glued to the last bar. A line is split at each
  carriage return and before each record start (a process prefix or ``LEVEL MM-DD HH:MM:SS``).

The phase values are those of ``reprofleet.model.Phase`` (this module must not import it).
The engine walks ``START_ORDER``, read from vLLM's own sources (0.25.1, 0.26.0, 0.33.0 and
0.34.0; ``tests/fixtures/vllm-logs/sources/`` cites every line) and skipping what a version
or runner does not do. Two phases have two steps in it:

* CUDA-graph capture: the memory profile captures graphs before the KV cache is sized (the
  V1 runner of 0.20+ between "Profiling CUDA graph memory:" and "Estimated CUDA graph
  memory:", printing no bar; the V2 runner, 0.33's default, with its bars), and the real
  capture comes after the warm-ups. The real one is the one the seed's hosts froze in, so a
  profile capture never hides it.
* Kernel warm-up: from 0.30 ``kernel_warmup()`` opens with "JIT kernel warmup starting."
  (router GEMM and CuTeDSL warm-ups follow, then autotune, then attention); up to 0.26 it
  runs autotune, attention, then CuTeDSL last, whose line is the last before capture
  (0.25.1 prints none of its own before the bar: the seed's last line). That late step is
  ``CAPTURE_NEXT``: a freeze after it may be before or inside capture.
"""

from __future__ import annotations

import re
from typing import List, Optional, Pattern, Tuple

ENGINE_INIT = "engine_init"
MODEL_LOAD = "model_load"
TORCH_COMPILE = "torch_compile"
KV_CACHE = "kv_cache"
KERNEL_WARMUP = "kernel_warmup"
FLASHINFER_AUTOTUNE = "flashinfer_autotune"
ATTENTION_WARMUP = "attention_warmup"
CUDA_GRAPH_CAPTURE = "cuda_graph_capture"
READY = "ready"

# Every step an engine start may take, in order (a version or runner skips some).
START_ORDER = (ENGINE_INIT, MODEL_LOAD, TORCH_COMPILE, CUDA_GRAPH_CAPTURE, KV_CACHE, KERNEL_WARMUP,
               FLASHINFER_AUTOTUNE, ATTENTION_WARMUP, KERNEL_WARMUP, CUDA_GRAPH_CAPTURE, READY)
PROFILE_CAPTURE = 3  # the memory profile's capture, before KV sizing
EARLY_KERNEL_WARMUP = 5  # 0.30+: "JIT kernel warmup starting." opens the warm-ups
CAPTURE_NEXT = 8  # up to 0.26: CuTeDSL ends the warm-ups; capture starts next
CAPTURE_NEXT_NOTE = "after kernel warmup; capture starts next"

# Raw ESC sequences; the same written out (\x1b, \033, \e, \u001b, ^[); or with the ESC lost.
_ANSI = re.compile(r"(?:\x1b|\\x1b|\\033|\\e|\\u001b|\^\[)\[[0-9;?]*[ -/]*[@-~]"
                   r"|\[\d{1,3}(?:;\d{1,3})*m")
# Where a glued record begins: a carriage return (raw or ^M), a process prefix, a level tag.
_RECORD_BREAK = re.compile(r"\r|\^M|(?=\([\w:.-]+(?: [\w=.]+)* pid=\d+(?:, ip=[\d.]+)?\) )"
                           r"|(?=\b(?:DEBUG|INFO|WARNING|ERROR) \d\d-\d\d \d\d:\d\d:\d\d )")
# "Initializing a V1 LLM engine (v0.14.0) with config:", V0's "a V0 LLM engine", and the
# older "Initializing an LLM engine (vdev) with config:".
ENGINE_START = re.compile(r"Initializing an? (?:V\d )?LLM engine \(v?[^)]*\) with config:")
# CuTeDSL's warm-up lines: the last of kernel_warmup() up to 0.26, inside its JIT step from 0.30.
CUTEDSL_MARKS = ("Warming up CuTeDSL", "Skipping CuTeDSL warmup")

# (phase, fragments, patterns): the first rule that matches a record wins, so more specific
# rules come first (e.g. "init engine (profile, create kv cache, ...) took" is READY).
Rule = Tuple[str, Tuple[str, ...], Tuple[Pattern[str], ...]]
RULES: Tuple[Rule, ...] = (
    (READY, ("init engine (profile, create kv cache, warmup model) took",), ()),
    (CUDA_GRAPH_CAPTURE, (
        "Capturing model for DFlash speculator", "Graph capturing finished in", "CUDA graph pool memory:",
        "Torch profiler disabled for CUDA graph capture", "Torch profiler enabled for CUDA graph capture",
        "Profiling CUDA graph memory:",  # the V1 runner captures two graphs per mode after it (0.20+)
    ), (
        # A qualifier may sit between the verb and the noun: "Capturing CUDA graphs (mixed
        # prefill-decode, PIECEWISE)", "Capturing CUDA graph shapes", "Capturing dflash CUDA
        # graphs", V0's "Capturing cudagraphs for decoding", DEBUG "Capturing a cudagraph on".
        re.compile(r"Capturing (?:[\w-]+ ){0,3}(?:CUDA ?graphs?|cudagraphs?)\b", re.IGNORECASE),
    )),
    (ATTENTION_WARMUP, ("Warming up FlashInfer attention",), ()),
    (FLASHINFER_AUTOTUNE, (
        "Skipping FlashInfer autotune", "Using FlashInfer autotune cache", "Running FlashInfer autotune",
        "Using FlashInfer managed autotune cache", "Skipping FlashInfer autotuning for ops",
        "[Autotuner]: Autotuning process", "[AutoTuner]: Tuning ", "[Autotuner]: Tuning ",
    ), ()),
    (KERNEL_WARMUP, ("JIT kernel warmup starting", "Warming up CuTeDSL", "Skipping CuTeDSL warmup"), (
        # 0.26: "Warming up ll_bf16 router GEMM kernels."; 0.33: "... for shapes: ...", "Warming up
        # BF16x3 router GEMM for K=..", "Warmed up BF16x3 router GEMM configs"
        re.compile(r"Warm(?:ing|ed) up \w+ router GEMM"),
    )),
    (KV_CACHE, (
        "Available KV cache memory:", "CUDA graph memory profiling is enabled", "GPU KV cache size:",
        "Maximum concurrency for ", "Estimated CUDA graph memory:",
        # V0: the memory profile of each worker, then "# CUDA blocks: N, # CPU blocks: M"
        "Memory profiling takes", "the current vLLM instance can use total_gpu_memory",
    ), (re.compile(r"# (?:GPU|CUDA|cuda|gpu) blocks: \d"),)),
    (TORCH_COMPILE, (
        "for vLLM's torch.compile", "Starting torch.compile", "Dynamo bytecode transform time:",
        "Compiling a graph for ", "Directly load ", "torch.compile takes",
        "torch.compile took", "torch.compile and initial profiling/warmup run together took",
        "Initial profiling/warmup run took",
    ), ()),
    (MODEL_LOAD, (
        "Starting to load model ", "Loading model from scratch", "attention backend out of potential backends",
        "MoE backend out of potential backends", "Initializing model took", "Loading weights took ",
        "Model loading took ", "Loading model weights took ", "Loading drafter model",
    ), ()),
    (ENGINE_INIT, ("Using V2 Model Runner",), (
        re.compile(r"\bworld_size=\d+.*\brank=\d+"),
        re.compile(r"\brank \d+ in world size \d+ is assigned as"),
    )),
)


def clean(line: str) -> str:
    """The line without ANSI colour, raw or written out."""
    return _ANSI.sub("", line)


def records_of(line: str) -> List[str]:
    """The log records a line holds: usually one, several when tqdm bars glue them together."""
    return [record for record in _RECORD_BREAK.split(clean(line)) if record.strip()]


def _record_phase(record: str) -> Optional[str]:
    if ENGINE_START.search(record):
        return ENGINE_INIT
    for phase, fragments, patterns in RULES:
        if any(fragment in record for fragment in fragments) or any(p.search(record) for p in patterns):
            return phase
    return None


def phases_in(line: str) -> List[str]:
    """The phase each record of a line marks, in order (most lines mark nothing)."""
    return [phase for phase in map(_record_phase, records_of(line)) if phase is not None]


def phase_of(line: str) -> Optional[str]:
    """The phase a line marks (its last record's, when several are glued), or None."""
    phases = phases_in(line)
    return phases[-1] if phases else None


def is_engine_start(line: str) -> bool:
    return ENGINE_START.search(clean(line)) is not None


class PhaseTracker:
    """Turns a stream of lines into phase changes along ``START_ORDER``, never backwards.

    A phase is reported once per step, at the first record that marks it; a record marking
    the current phase, or an earlier step, is no change; a new engine start begins again.
    Capture before KV sizing is the profile's step, capture after it the real one. Router
    GEMM lines enter kernel warm-up only as its opening step (0.26 runs them after the
    autotune, inside no step of their own); a CuTeDSL line outside an open kernel warm-up is
    the warm-ups' last step (``CAPTURE_NEXT``).
    """

    def __init__(self) -> None:
        self.phase: Optional[str] = None
        self.step = -1  # index into START_ORDER

    @property
    def note(self) -> str:
        """What the log cannot tell at the current step (empty when it tells)."""
        return CAPTURE_NEXT_NOTE if self.step == CAPTURE_NEXT else ""

    def feed(self, line: str) -> Optional[str]:
        """The phase entered at this line (the last, if it entered several), or None."""
        entered = self.feed_all(line)
        return entered[-1] if entered else None

    def feed_all(self, line: str) -> List[str]:
        """Every phase entered at this line, in order (several when records are glued)."""
        entered = []
        for record in records_of(line):
            phase = self._feed_record(record)
            if phase is not None:
                entered.append(phase)
        return entered

    def _feed_record(self, record: str) -> Optional[str]:
        phase = _record_phase(record)
        if phase is None:
            return None
        if ENGINE_START.search(record):
            if self.phase == ENGINE_INIT:
                return None
            self.step = -1
        step = self._step_for(phase, record)
        if step is None:
            return None
        self.step, self.phase = step, phase
        return phase

    def _step_for(self, phase: str, record: str) -> Optional[int]:
        if phase == self.phase:
            return None
        ahead = [i for i in range(self.step + 1, len(START_ORDER)) if START_ORDER[i] == phase]
        if not ahead:
            return None
        if phase == KERNEL_WARMUP:
            wanted = CAPTURE_NEXT if any(mark in record for mark in CUTEDSL_MARKS) else EARLY_KERNEL_WARMUP
            return wanted if wanted in ahead else None
        return ahead[0]


def phases_of(lines: List[str]) -> List[Tuple[int, str]]:
    """(1-based line number, phase) for each phase change in a whole log."""
    tracker = PhaseTracker()
    return [(number, phase) for number, line in enumerate(lines, start=1) for phase in tracker.feed_all(line)]
