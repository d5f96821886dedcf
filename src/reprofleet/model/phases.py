"""The steps of a vLLM engine start, and where an attempt ended relative to the phase at risk.

An error "after CUDA-graph capture" is a run that survived the risky phase (a
non-reproduction); one *in* it may be the bug caught short of a freeze; one before it says
nothing about the bug. Read from vLLM's own sources (0.25.1, 0.26.0, 0.33.0, 0.34.0), every
engine walks one order, ``START_ORDER``, skipping the steps its version or runner does not
take, and two phases have two steps in it:

* capture: the memory profile captures graphs before the KV cache is sized (V1 runner from
  0.20, silently; V2 runner, 0.33's default, with its bars), then the real capture comes
  after the warm-ups. A phase's *last* step is the one judged: an attempt that got through
  the profile's capture but not the real one has not got through capture.
* kernel warm-up: from 0.30 it opens the warm-ups; up to 0.26 its CuTeDSL line closes them
  and capture starts next with no line of its own (0.25.1) or one line (0.26.0). An attempt
  whose last step is that one (``CAPTURE_NEXT``) may have frozen before capture or inside it:
  the log cannot tell, so it is judged ``EDGE`` and counted as in capture wherever the
  phase at risk is capture, in every cell alike.

The agent's tracker (``collectors/vllm_phases.py``, which cannot import this) walks the same
order; ``tests/agent/test_protocol_agreement.py`` pins the two equal. A record lists the
phases it entered, in order (``phases``); a record without the list (written before it
existed) has only its last phase, whose first step is taken (for capture: in it either way).
"""

from __future__ import annotations

from enum import Enum, unique
from typing import Sequence

from reprofleet.model.outcomes import Phase

START_ORDER: tuple[Phase, ...] = (
    Phase.ENGINE_INIT, Phase.MODEL_LOAD, Phase.TORCH_COMPILE, Phase.CUDA_GRAPH_CAPTURE, Phase.KV_CACHE,
    Phase.KERNEL_WARMUP, Phase.FLASHINFER_AUTOTUNE, Phase.ATTENTION_WARMUP, Phase.KERNEL_WARMUP,
    Phase.CUDA_GRAPH_CAPTURE, Phase.READY)
CAPTURE_NEXT = 8  # up to 0.26: CuTeDSL closes the warm-ups; capture starts next
CAPTURE_NEXT_NOTE = "after kernel warmup; capture starts next"


@unique
class PhasePosition(str, Enum):
    """Where an attempt's last phase lies relative to the phase at risk."""

    BEFORE = "before"
    IN = "in"
    EDGE = "edge"  # right before the phase at risk, with nothing printed between: before or in it
    AFTER = "after"
    UNDECIDED = "undecided"  # the phases fit no order (a phase no version prints in that order)


def walk(phases: Sequence[str]) -> list[int] | None:
    """The steps of ``START_ORDER`` the phases entered, in order, or None when they fit no walk.

    Each phase takes the first step ahead that is it; a kernel warm-up right after the
    attention warm-up or the autotune is the closing one (no other step is left for it). An
    engine that started again begins a new walk."""
    sequence = list(phases)
    if Phase.ENGINE_INIT.value in sequence:
        sequence = sequence[len(sequence) - 1 - sequence[::-1].index(Phase.ENGINE_INIT.value):]
    names = [p.value for p in START_ORDER]
    steps: list[int] = []
    for phase in sequence:
        at = steps[-1] if steps else -1
        ahead = [i for i in range(at + 1, len(names)) if names[i] == phase]
        if not ahead:
            return None
        steps.append(ahead[0])
    return steps


def phase_note(last_phase: str | None, phases: Sequence[str] | None = None) -> str:
    """What the log could not tell about where the attempt stopped (empty when it could)."""
    steps = walk(list(phases or ()) or ([last_phase] if last_phase else []))
    return CAPTURE_NEXT_NOTE if steps and steps[-1] == CAPTURE_NEXT else ""


def position(last_phase: str | None, phases: Sequence[str] | None, at_risk: Phase) -> PhasePosition:
    """Before, in, at the edge of or after ``at_risk``'s last step.

    No phase at all is before (the start never got going); phases that fit no walk are
    undecided."""
    if not last_phase and not phases:
        return PhasePosition.BEFORE
    steps = walk(list(phases or ()) or [str(last_phase)])
    if not steps:
        return PhasePosition.UNDECIDED
    here = steps[-1]
    risk = max(i for i, phase in enumerate(START_ORDER) if phase is at_risk)
    if START_ORDER[here] is at_risk:
        return PhasePosition.IN
    if here == CAPTURE_NEXT and risk == CAPTURE_NEXT + 1:
        return PhasePosition.EDGE
    return PhasePosition.BEFORE if here < risk else PhasePosition.AFTER
