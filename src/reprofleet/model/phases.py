"""The order of a vLLM engine start's phases, per engine generation, and where an attempt
ended relative to the phase at risk.

An error "after CUDA-graph capture" is a run that survived the risky phase (a
non-reproduction); one *in* it may be the bug caught short of a freeze; one before it says
nothing about the bug. Which of the three a last phase is depends on the engine: the V2
model runner (vLLM 0.33's default) captures graphs while it profiles memory, before it
sizes the KV cache, while the V1 runner and the V0 engine capture last. So ``kv_cache`` is
before capture under V1 and after it under V2. The agent's phase tracker
(``collectors/vllm_phases.py``, which cannot import this) follows the same two orders;
``tests/agent/test_protocol_agreement.py`` pins them equal.

A record lists the phases it entered, in order (``phases``); the orders that sequence fits
are the candidates, and a position is decided only when every candidate agrees. A record
without the list (written before it existed) has only its last phase, which fits every
order holding it: ``kv_cache`` then stays undecided, never guessed.
"""

from __future__ import annotations

from enum import Enum, unique
from typing import Mapping, Sequence

from reprofleet.model.outcomes import Phase


@unique
class EngineRunner(str, Enum):
    """The engine generations whose logs the agent parses."""

    V0_ENGINE = "v0"
    V1_RUNNER = "v1"
    V2_RUNNER = "v2"


_CAPTURE_LAST = tuple(Phase)
_CAPTURE_EARLY = (Phase.ENGINE_INIT, Phase.MODEL_LOAD, Phase.TORCH_COMPILE, Phase.CUDA_GRAPH_CAPTURE, Phase.KV_CACHE,
                  Phase.KERNEL_WARMUP, Phase.FLASHINFER_AUTOTUNE, Phase.ATTENTION_WARMUP, Phase.READY)
PHASE_ORDERS: Mapping[EngineRunner, tuple[Phase, ...]] = {
    EngineRunner.V0_ENGINE: _CAPTURE_LAST,
    EngineRunner.V1_RUNNER: _CAPTURE_LAST,
    EngineRunner.V2_RUNNER: _CAPTURE_EARLY,
}


@unique
class PhasePosition(str, Enum):
    """Where an attempt's last phase lies relative to the phase at risk."""

    BEFORE = "before"
    IN = "in"
    AFTER = "after"
    UNDECIDED = "undecided"  # before under one engine's order, after under another's


def fits(sequence: Sequence[str], order: Sequence[Phase]) -> bool:
    """Whether the phases entered, in this order, are a rising walk through ``order``."""
    names = [p.value for p in order]
    at = -1
    for phase in sequence:
        if phase not in names or names.index(phase) <= at:
            return False
        at = names.index(phase)
    return True


def runners_of(last_phase: str | None, phases: Sequence[str] | None = None) -> tuple[EngineRunner, ...]:
    """The engine generations whose order the attempt's phases fit."""
    sequence = list(phases or ()) or ([last_phase] if last_phase else [])
    if Phase.ENGINE_INIT.value in sequence:  # an engine that started again begins a new walk
        sequence = sequence[len(sequence) - 1 - sequence[::-1].index(Phase.ENGINE_INIT.value):]
    return tuple(runner for runner, order in PHASE_ORDERS.items() if fits(sequence, order))


def position(last_phase: str | None, phases: Sequence[str] | None, at_risk: Phase) -> PhasePosition:
    """Before, in or after ``at_risk``, when every fitting engine order agrees.

    No phase at all is before (the start never got going); a last phase no order knows is
    undecided."""
    if not last_phase and not phases:
        return PhasePosition.BEFORE
    last = (list(phases)[-1] if phases else last_phase) or ""
    found = set()
    for runner in runners_of(last_phase, phases):
        names = [p.value for p in PHASE_ORDERS[runner]]
        here, risk = names.index(last), names.index(at_risk.value)
        found.add(PhasePosition.BEFORE if here < risk else PhasePosition.IN if here == risk else PhasePosition.AFTER)
    return found.pop() if len(found) == 1 else PhasePosition.UNDECIDED
