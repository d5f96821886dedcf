"""Which nvidia-smi calls a GPU policy needs (pure: no I/O, unit-tested with plain values).

A policy names every setting; a missing or null one is put back to the card default, so
that a cell never inherits the previous cell's clock lock. Persistence has no card
default: "default" is what the card had before our first apply (the baseline).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

from agent_protocol import UsageError

POLICY_KEYS = ("graphics_clocks", "memory_clocks", "power_limit_w", "persistence", "application_clocks")
PAIR_KEYS = ("graphics_clocks", "memory_clocks", "application_clocks")


class Step(NamedTuple):
    """One nvidia-smi call: its arguments after ``-i N``, the key it serves, and whether
    it sets a value the policy asked for (a failure then fails the apply) or resets one."""

    args: Sequence[str]
    key: str
    requested: bool


def parse_policy(text: Optional[str]) -> Dict[str, Any]:
    """The ``--json`` argument, validated: GpuPolicy field names only, sane values."""
    try:
        raw = json.loads(text or "{}")
    except ValueError as exc:
        raise UsageError("--json is not JSON: %s" % exc) from None
    if not isinstance(raw, dict):
        raise UsageError("--json must be an object of GpuPolicy fields")
    unknown = sorted(set(raw) - set(POLICY_KEYS))
    if unknown:
        raise UsageError("unknown policy keys %s (known: %s)" % (unknown, ", ".join(POLICY_KEYS)))
    policy = {key: raw.get(key) for key in POLICY_KEYS}
    for key in PAIR_KEYS:
        policy[key] = _pair(key, policy[key])
    limit = policy["power_limit_w"]
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0):
        raise UsageError("power_limit_w must be a positive number of watts, got %r" % (limit,))
    if policy["persistence"] is not None and not isinstance(policy["persistence"], bool):
        raise UsageError("persistence must be true, false or null, got %r" % (policy["persistence"],))
    return policy


def _pair(key: str, value: Any) -> Optional[List[int]]:
    if value is None:
        return None
    ok = (isinstance(value, (list, tuple)) and len(value) == 2
          and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value))
    if not ok:
        raise UsageError("%s must be [a, b] with positive integer MHz, got %r" % (key, value))
    if key != "application_clocks" and value[0] > value[1]:
        raise UsageError("%s must be [min, max] with min <= max, got %r" % (key, value))
    return [int(value[0]), int(value[1])]


def power_limit_problem(watts: float, low_w: Optional[float], high_w: Optional[float]) -> Optional[str]:
    """Why `watts` cannot be set on this card, or None (unknown range: nvidia-smi decides)."""
    if low_w is None or high_w is None or low_w <= watts <= high_w:
        return None
    return "power limit %g W is outside this card's range %g-%g W (NVML constraints)" % (watts, low_w, high_w)


def _watts(value: float) -> str:
    return ("%.2f" % value).rstrip("0").rstrip(".")


def plan_apply(policy: Dict[str, Any], default_limit_w: Optional[float],
               baseline_persistence: Optional[bool]) -> List[Step]:
    """Persistence first (settings hold better with it on), then power, then clocks."""
    steps: List[Step] = []
    persistence = policy.get("persistence")
    if persistence is not None:
        steps.append(Step(("-pm", "1" if persistence else "0"), "persistence", True))
    elif baseline_persistence is not None:
        steps.append(Step(("-pm", "1" if baseline_persistence else "0"), "persistence", False))
    limit = policy.get("power_limit_w")
    if limit is not None:
        steps.append(Step(("-pl", _watts(limit)), "power_limit_w", True))
    elif default_limit_w is not None:
        steps.append(Step(("-pl", _watts(default_limit_w)), "power_limit_w", False))
    steps.append(_clock_step(policy.get("graphics_clocks"), "-lgc", "-rgc", "graphics_clocks"))
    steps.append(_clock_step(policy.get("memory_clocks"), "-lmc", "-rmc", "memory_clocks"))
    steps.append(_clock_step(policy.get("application_clocks"), "-ac", "-rac", "application_clocks"))
    return steps


def plan_restore(default_limit_w: Optional[float], baseline_persistence: Optional[bool],
                 baseline_limit_w: Optional[float] = None) -> List[Step]:
    """What the owner had before our first apply: its persistence and its power limit (a custom
    limit of the owner's is theirs to keep, not the card's default); clocks reset to the card's
    (a lock has no NVML getter: one the owner had cannot be read back, so it cannot be put back)."""
    owner = {"power_limit_w": baseline_limit_w} if baseline_limit_w is not None else {}
    return plan_apply(owner, default_limit_w, baseline_persistence)


def _clock_step(pair: Optional[List[int]], set_flag: str, reset_flag: str, key: str) -> Step:
    if pair is None:
        return Step((reset_flag,), key, False)
    return Step((set_flag, "%d,%d" % (pair[0], pair[1])), key, True)


def command_argv(nvidia_smi: str, gpu: int, step: Step, is_root: bool) -> List[str]:
    """The full argv; ``sudo -n`` (never prompts: fails at once) when not root."""
    argv = [nvidia_smi, "-i", str(gpu)] + list(step.args)
    return argv if is_root else ["sudo", "-n"] + argv


def is_unsupported(output: str) -> bool:
    """nvidia-smi's way of saying this board has no such setting."""
    text = output.lower()
    return "not supported" in text or "not_supported" in text
