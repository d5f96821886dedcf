"""How an attempt ended, how far it got, and what that counts as."""

from __future__ import annotations

from enum import Enum, unique
from typing import Mapping


@unique
class Outcome(str, Enum):
    """How one attempt ended; see the README's outcome table (Quickstart, after step 5)."""

    CLEAN = "clean"
    ERROR = "error"
    HANG = "hang"
    WEDGE = "wedge"
    REBOOT = "reboot"
    POWER_LOSS = "power_loss"  # the power device read off before any action of this controller
    INFRA = "infra"


@unique
class Phase(str, Enum):
    """The phases of a vLLM engine start, in the order they occur."""

    ENGINE_INIT = "engine_init"
    MODEL_LOAD = "model_load"
    TORCH_COMPILE = "torch_compile"
    KV_CACHE = "kv_cache"
    KERNEL_WARMUP = "kernel_warmup"
    FLASHINFER_AUTOTUNE = "flashinfer_autotune"
    ATTENTION_WARMUP = "attention_warmup"
    CUDA_GRAPH_CAPTURE = "cuda_graph_capture"
    READY = "ready"


def outcome_counts(counts: Mapping[str, int]) -> dict[str, int]:
    """Counts by outcome as ``--json`` and ``invoke export`` give them: every outcome its own
    key, 0 included (``power_loss`` as much as ``wedge``), in this enum's order; an outcome
    this version does not know (a later controller's) follows, sorted."""
    known = {o.value: int(counts.get(o.value, 0)) for o in Outcome}
    return {**known, **{k: int(v) for k, v in sorted(counts.items()) if k not in known}}


PHASE_ORDER: tuple[str, ...] = tuple(p.value for p in Phase)


def phase_reached(last_phase: str | None, phase: "Phase") -> bool:
    """Whether ``last_phase`` is at or past ``phase`` in the V1 runner's order (the figures'
    order). Judging does not use it: an engine's order decides there (``model.phases``)."""
    if last_phase not in PHASE_ORDER:
        return False
    return PHASE_ORDER.index(str(last_phase)) >= PHASE_ORDER.index(phase.value)


@unique
class Role(str, Enum):
    """What one outcome means for a cell's rate."""

    REPRODUCTION = "reproduction"  # in the numerator and the denominator
    NON_REPRODUCTION = "non_reproduction"  # in the denominator only: it got through the phase at risk
    FAILED_AT_RISK = "failed_at_risk"  # an error or hang inside the phase at risk: its own column, never clean
    EXCLUDED = "excluded"  # in neither, but counted and shown with its reason (and in the excluded share)
    NOT_RUN = "not_run"  # a slot that runs again (interrupted, not run, cut): in no rate and no share
