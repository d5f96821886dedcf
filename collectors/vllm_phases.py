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
The order of phases is the order the engine runs them, which depends on the model runner:
the V2 runner (0.33's default) captures CUDA graphs while profiling memory, *before* it
sizes the KV cache; the V1 runner and the V0 engine capture last.
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

V1_ORDER = (ENGINE_INIT, MODEL_LOAD, TORCH_COMPILE, KV_CACHE, KERNEL_WARMUP, FLASHINFER_AUTOTUNE,
            ATTENTION_WARMUP, CUDA_GRAPH_CAPTURE, READY)
V2_ORDER = (ENGINE_INIT, MODEL_LOAD, TORCH_COMPILE, CUDA_GRAPH_CAPTURE, KV_CACHE, KERNEL_WARMUP,
            FLASHINFER_AUTOTUNE, ATTENTION_WARMUP, READY)

# Raw ESC sequences; the same written out (\x1b, \033, \e, \u001b, ^[); or with the ESC lost.
_ANSI = re.compile(r"(?:\x1b|\\x1b|\\033|\\e|\\u001b|\^\[)\[[0-9;?]*[ -/]*[@-~]"
                   r"|\[\d{1,3}(?:;\d{1,3})*m")
# Where a glued record begins: a carriage return (raw or ^M), a process prefix, a level tag.
_RECORD_BREAK = re.compile(r"\r|\^M|(?=\([\w:.-]+(?: [\w=.]+)* pid=\d+(?:, ip=[\d.]+)?\) )"
                           r"|(?=\b(?:DEBUG|INFO|WARNING|ERROR) \d\d-\d\d \d\d:\d\d:\d\d )")
# "Initializing a V1 LLM engine (v0.14.0) with config:", V0's "a V0 LLM engine", and the
# older "Initializing an LLM engine (vdev) with config:".
ENGINE_START = re.compile(r"Initializing an? (?:V\d )?LLM engine \(v?[^)]*\) with config:")
# Only the banner: the V1 runner of 0.10 and 0.11 also says "Loading model from scratch...".
V2_RUNNER_MARKS = ("Using V2 Model Runner",)

# (phase, fragments, patterns): the first rule that matches a record wins, so more specific
# rules come first (e.g. "init engine (profile, create kv cache, ...) took" is READY).
Rule = Tuple[str, Tuple[str, ...], Tuple[Pattern[str], ...]]
RULES: Tuple[Rule, ...] = (
    (READY, ("init engine (profile, create kv cache, warmup model) took",), ()),
    (CUDA_GRAPH_CAPTURE, (
        "Capturing model for DFlash speculator", "Graph capturing finished in", "CUDA graph pool memory:",
        "Torch profiler disabled for CUDA graph capture",
    ), (
        # A qualifier may sit between the verb and the noun: "Capturing CUDA graphs (mixed
        # prefill-decode, PIECEWISE)", "Capturing CUDA graph shapes", "Capturing dflash CUDA
        # graphs", V0's "Capturing cudagraphs for decoding", DEBUG "Capturing a cudagraph on".
        re.compile(r"Capturing (?:[\w-]+ ){0,3}(?:CUDA ?graphs?|cudagraphs?)\b", re.IGNORECASE),
    )),
    (ATTENTION_WARMUP, ("Warming up FlashInfer attention",), ()),
    (FLASHINFER_AUTOTUNE, (
        "Skipping FlashInfer autotune", "Using FlashInfer autotune cache", "Running FlashInfer autotune",
        "[Autotuner]: Autotuning process", "[AutoTuner]: Tuning ", "[Autotuner]: Tuning ",
    ), ()),
    (KERNEL_WARMUP, ("JIT kernel warmup starting", "Warming up CuTeDSL", "Skipping CuTeDSL warmup"), ()),
    (KV_CACHE, (
        "Available KV cache memory:", "CUDA graph memory profiling is enabled", "GPU KV cache size:",
        "Maximum concurrency for ", "Profiling CUDA graph memory:", "Estimated CUDA graph memory:",
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


def marks_v2_runner(line: str) -> bool:
    return any(mark in line for mark in V2_RUNNER_MARKS)


class PhaseTracker:
    """Turns a stream of lines into phase changes that never go backwards.

    A phase is reported once, at the first record that marks it; a record marking an earlier
    phase than the current one is ignored (0.25 prints its CuTeDSL warm-up line after
    the autotune, for example), except that a new engine start begins again.
    """

    def __init__(self) -> None:
        self.phase: Optional[str] = None
        self.order = V1_ORDER
        self._kv_seen = False

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
            self.order, self._kv_seen = V1_ORDER, False
            return self._enter(ENGINE_INIT, force=self.phase != ENGINE_INIT)
        self._learn_runner(record, phase)
        return self._enter(phase)

    def _learn_runner(self, record: str, phase: str) -> None:
        """The V2 runner says so, or shows itself by capturing before KV sizing."""
        if phase == KV_CACHE:
            self._kv_seen = True
        early_capture = phase == CUDA_GRAPH_CAPTURE and not self._kv_seen and self.phase in (
            MODEL_LOAD, TORCH_COMPILE)
        if marks_v2_runner(record) or early_capture:
            self.order = V2_ORDER

    def _enter(self, phase: str, force: bool = False) -> Optional[str]:
        current = self.order.index(self.phase) if self.phase is not None else -1
        if force or self.order.index(phase) > current:
            self.phase = phase
            return phase
        return None


def phases_of(lines: List[str]) -> List[Tuple[int, str]]:
    """(1-based line number, phase) for each phase change in a whole log."""
    tracker = PhaseTracker()
    return [(number, phase) for number, line in enumerate(lines, start=1) for phase in tracker.feed_all(line)]
