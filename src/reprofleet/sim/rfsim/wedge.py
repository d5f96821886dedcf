"""The wedge model: how likely one engine start is to freeze a simulated host. Pure.

It encodes the seed report (seed-sm120-hostwedge.md) as parameters, so that tests can check
reprofleet's statistics against a known truth:

* only *susceptible* hosts wedge, with ``p_wedge`` per attempt at the default policy;
* a graphics-clock ceiling at or below ``safe_clock_mhz`` (seed: ``-lgc 180,2800``) makes a
  wedge impossible; above it ``p_wedge`` applies at once (a step), or, with ``wedge_ramp_mhz``,
  rises linearly from 0 at the safe clock to ``p_wedge`` at ``safe_clock_mhz + wedge_ramp_mhz``
  (a known P(wedge | ceiling) for a boundary search to find);
* the power limit has NO protective effect (seed: ``-pl 350`` alone still wedges), even
  though it lowers the clocks actually reached;
* the other clean controls of the seed (spec_tokens <= 8, CUDA_LAUNCH_BLOCKING=1,
  enforce_eager, vLLM >= 0.26.0) multiply ``p_wedge`` by a factor (default 0, except vLLM
  0.26 at 0.2: "6 clean starts; insufficient data to call fixed").

The model reads the policy the GPU actually has (see :class:`Conditions`), never what a
playbook asked for: a policy that silently failed to apply must still wedge.

Host-side module: standard library only (it also runs on simulated hosts).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

OUTCOMES = ("clean", "error", "hang", "wedge", "reboot")
LOCKUP = "lockup"  # a script entry: a wedge that the kernel's lockup watchdog sees
# script entries of things that are not the bug: an automatic upgrade's reboot during the attempt,
# and a PoC that writes a clean exit of its own into the agent's files, then fails
ORDERLY_REBOOT = "orderly_reboot"
FORGE = "forge"
SCRIPT_ENTRIES = OUTCOMES + (LOCKUP, ORDERLY_REBOOT, FORGE, "auto")
LOCKUP_KINDS = ("soft", "hard")


@dataclass(frozen=True)
class WedgeParams:
    """Per-host truth of the simulation (from the fleet config)."""

    susceptible: bool = True
    p_wedge: float = 0.35
    safe_clock_mhz: int = 2800
    wedge_ramp_mhz: float = 0.0  # 0: a step at safe_clock_mhz; else P rises linearly over this many MHz above it
    p_error: float = 0.03
    p_hang: float = 0.02
    p_reboot: float = 0.0
    spec_tokens_factor: float = 0.0  # applied when spec_tokens <= 8
    cuda_launch_blocking_factor: float = 0.0
    enforce_eager_factor: float = 0.0
    vllm_fixed_in: str = "0.26.0"
    vllm_fixed_factor: float = 0.0  # versions >= vllm_fixed_in without their own entry
    vllm_factors: Tuple[Tuple[str, float], ...] = (("0.26", 0.2),)  # version prefix -> factor
    p_lockup_seen: float = 0.0  # share of wedges the kernel's watchdog sees (a CPU stuck in the kernel)
    lockup_kind: str = "soft"  # what it sees then: "soft" (softlockup) or "hard" (NMI watchdog)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "WedgeParams":
        known = {name: config[name] for name in cls.__dataclass_fields__ if name in config}
        if "vllm_factors" in known:
            raw = known["vllm_factors"]
            items = raw.items() if isinstance(raw, Mapping) else raw
            known["vllm_factors"] = tuple((str(k), float(v)) for k, v in items)
        return cls(**known)


@dataclass(frozen=True)
class Conditions:
    """What one attempt actually ran with."""

    graphics_ceiling_mhz: int  # highest graphics clock the GPU may reach (lock, app clocks, max)
    power_limit_w: float  # recorded only: it does not protect (seed)
    spec_tokens: Optional[int] = None
    enforce_eager: bool = False
    cuda_launch_blocking: bool = False
    vllm_version: str = "0.25.1"


def parse_version(text: str) -> Optional[Tuple[int, ...]]:
    parts = text.strip().lstrip("v").split("+")[0].split(".")
    try:
        return tuple(int(p) for p in parts[:3])
    except ValueError:
        return None


def vllm_factor(params: WedgeParams, version: str) -> float:
    parsed = parse_version(version)
    fixed_in = parse_version(params.vllm_fixed_in)
    if parsed is None or fixed_in is None or parsed < fixed_in:
        return 1.0
    for prefix, factor in params.vllm_factors:
        if version.lstrip("v") == prefix or version.lstrip("v").startswith(prefix + "."):
            return factor
    return params.vllm_fixed_factor


def clock_share(params: WedgeParams, ceiling_mhz: int) -> float:
    """The share of ``p_wedge`` a ceiling above the safe clock gets: 1 (a step), or the ramp's."""
    if params.wedge_ramp_mhz <= 0:
        return 1.0
    return min(1.0, (ceiling_mhz - params.safe_clock_mhz) / params.wedge_ramp_mhz)


def wedge_probability(params: WedgeParams, cond: Conditions) -> float:
    if not params.susceptible or cond.graphics_ceiling_mhz <= params.safe_clock_mhz:
        return 0.0
    p = params.p_wedge * clock_share(params, cond.graphics_ceiling_mhz)
    if cond.spec_tokens is not None and cond.spec_tokens <= 8:
        p *= params.spec_tokens_factor
    if cond.cuda_launch_blocking:
        p *= params.cuda_launch_blocking_factor
    if cond.enforce_eager:
        p *= params.enforce_eager_factor
    return p * vllm_factor(params, cond.vllm_version)


def outcome_probabilities(params: WedgeParams, cond: Conditions) -> Dict[str, float]:
    """Probability of each outcome; the non-wedge failures do not depend on the policy."""
    probs = {
        "wedge": wedge_probability(params, cond),
        "reboot": params.p_reboot,
        "hang": params.p_hang,
        "error": params.p_error,
    }
    total = sum(probs.values())
    if total > 1.0:  # only reachable with a bad config; keep the model a distribution
        probs = {k: v / total for k, v in probs.items()}
        total = 1.0
    probs["clean"] = 1.0 - total
    return probs


def pick(probs: Mapping[str, float], u: float) -> str:
    """The outcome a uniform draw ``u`` in [0, 1) falls on (fixed order, so seeds replay)."""
    acc = 0.0
    for name in ("wedge", "reboot", "hang", "error"):
        acc += probs.get(name, 0.0)
        if u < acc:
            return name
    return "clean"


@dataclass(frozen=True)
class Decision:
    outcome: str
    source: str  # "script" or "random"
    attempt: int
    probabilities: Dict[str, float] = field(default_factory=dict)
    lockup: Optional[str] = None  # a wedge the kernel saw: "soft" or "hard" (the host's sysctls decide the rest)


def decide(
    params: WedgeParams, cond: Conditions, *, attempt: int, seed: int, script: Sequence[str] = ()
) -> Decision:
    """The outcome of attempt number ``attempt`` (0-based, counted per host across boots)."""
    probs = outcome_probabilities(params, cond)
    if attempt < len(script) and script[attempt] != "auto":
        forced = script[attempt]
        if forced == LOCKUP:
            return Decision("wedge", "script", attempt, probs, lockup=params.lockup_kind)
        if forced not in OUTCOMES + (ORDERLY_REBOOT, FORGE):
            raise ValueError(f"script entry {forced!r} is not one of {', '.join(SCRIPT_ENTRIES)}")
        return Decision(forced, "script", attempt, probs)
    outcome = pick(probs, random.Random(f"{seed}:{attempt}").random())
    seen = outcome == "wedge" and random.Random(f"{seed}:{attempt}:lockup").random() < params.p_lockup_seen
    return Decision(outcome, "random", attempt, probs, lockup=params.lockup_kind if seen else None)
