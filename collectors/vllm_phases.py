"""Which phase of a vLLM engine start a log line marks (pure: no I/O).

Fragments come from /work/shared/VLLM-STARTUP.md (vLLM 0.11 .. 0.33): both line prefixes
(``(EngineCore pid=N) INFO ...`` and a bare ``INFO ...``), FlashInfer's own lines and
unprefixed tqdm bars. Matching is on fragments anywhere in the line, so a
``VLLM_LOGGING_PREFIX`` or a shortened DEBUG file name does not matter.

The phase values are those of ``reprofleet.model.Phase`` (this module must not import it).
The order of phases is the order the engine runs them, which depends on the model runner:
the V2 runner (0.33's default) captures CUDA graphs while profiling memory, *before* it
sizes the KV cache; the V1 runner captures last.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

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

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
ENGINE_START = re.compile(r"Initializing a V\d LLM engine \(v[^)]*\) with config:")
V2_RUNNER_MARKS = ("Using V2 Model Runner", "Loading model from scratch...")

# (phase, fragments): the first rule with a fragment in the line wins, so more specific
# rules come first (e.g. "init engine (profile, create kv cache, ...) took" is READY).
RULES: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    (READY, ("init engine (profile, create kv cache, warmup model) took",)),
    (CUDA_GRAPH_CAPTURE, (
        "Capturing CUDA graphs", "Capturing dflash CUDA graphs", "Capturing model for DFlash speculator",
        "Capturing a cudagraph on", "Graph capturing finished in", "CUDA graph pool memory:",
        "Torch profiler disabled for CUDA graph capture",
    )),
    (ATTENTION_WARMUP, ("Warming up FlashInfer attention",)),
    (FLASHINFER_AUTOTUNE, (
        "Skipping FlashInfer autotune", "Using FlashInfer autotune cache file:", "Running FlashInfer autotune",
        "[Autotuner]: Autotuning process", "[AutoTuner]: Tuning ", "[Autotuner]: Tuning ",
    )),
    (KERNEL_WARMUP, ("JIT kernel warmup starting", "Warming up CuTeDSL", "Skipping CuTeDSL warmup")),
    (KV_CACHE, (
        "Available KV cache memory:", "CUDA graph memory profiling is enabled", "GPU KV cache size:",
        "Maximum concurrency for ", "Profiling CUDA graph memory:", "Estimated CUDA graph memory:",
    )),
    (TORCH_COMPILE, (
        "for vLLM's torch.compile", "Starting torch.compile", "Dynamo bytecode transform time:",
        "Compiling a graph for ", "Directly load the compiled graph", "torch.compile takes",
        "torch.compile took", "torch.compile and initial profiling/warmup run together took",
        "Initial profiling/warmup run took",
    )),
    (MODEL_LOAD, (
        "Starting to load model ", "Loading model from scratch", "attention backend out of potential backends",
        "MoE backend out of potential backends", "Initializing model took", "Loading weights took ",
        "Model loading took ",
    )),
    (ENGINE_INIT, ("Using V2 Model Runner",)),
)
_WORLD = re.compile(r"\bworld_size=\d+.*\brank=\d+")


def phase_of(line: str) -> Optional[str]:
    """The phase a line marks, or None (most lines mark nothing)."""
    text = _ANSI.sub("", line)
    if ENGINE_START.search(text):
        return ENGINE_INIT
    for phase, fragments in RULES:
        if any(fragment in text for fragment in fragments):
            return phase
    if _WORLD.search(text):
        return ENGINE_INIT
    return None


def is_engine_start(line: str) -> bool:
    return ENGINE_START.search(_ANSI.sub("", line)) is not None


def marks_v2_runner(line: str) -> bool:
    return any(mark in line for mark in V2_RUNNER_MARKS)


class PhaseTracker:
    """Turns a stream of lines into phase changes that never go backwards.

    A phase is reported once, at the first line that marks it; a line marking an earlier
    phase than the current one is ignored (0.25 prints its CuTeDSL warm-up line after
    the autotune, for example), except that a new engine start begins again.
    """

    def __init__(self) -> None:
        self.phase: Optional[str] = None
        self.order = V1_ORDER
        self._kv_seen = False

    def feed(self, line: str) -> Optional[str]:
        """The phase entered at this line, or None if the phase did not change."""
        phase = phase_of(line)
        if phase is None:
            return None
        if is_engine_start(line):
            self.order, self._kv_seen = V1_ORDER, False
            return self._enter(ENGINE_INIT, force=self.phase != ENGINE_INIT)
        self._learn_runner(line, phase)
        return self._enter(phase)

    def _learn_runner(self, line: str, phase: str) -> None:
        """The V2 runner says so, or shows itself by capturing before KV sizing."""
        if phase == KV_CACHE:
            self._kv_seen = True
        early_capture = phase == CUDA_GRAPH_CAPTURE and not self._kv_seen and self.phase in (
            MODEL_LOAD, TORCH_COMPILE)
        if marks_v2_runner(line) or early_capture:
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
    changes = []
    for number, line in enumerate(lines, start=1):
        phase = tracker.feed(line)
        if phase is not None:
            changes.append((number, phase))
    return changes
