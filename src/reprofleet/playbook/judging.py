"""Settings that decide what a campaign's counts mean: reproductions, the reference cell, the
phase at risk, how much may be excluded, and when a cell may stop early (``stop:``).

They are read before any host is contacted for the same reason as every factor: a stopping
rule that cannot work (``p1`` above ``p0``, a rule name with a typo) found after the first
power cycle costs an evening, and a reference that names no cell would make every
comparison in the report silently use the wrong baseline.
"""

from __future__ import annotations

from typing import Any

from reprofleet.model import (DEFAULT_FIXED_RATIO, DEFAULT_REPRODUCTIONS, Cell, EarlyReproductions, Outcome, Phase,
                              StopKind, StopRule)
from reprofleet.stats.sprt import fixed_n
from reprofleet.suggest import did_you_mean

from reprofleet.playbook.document import Doc

REPRODUCTION_OUTCOMES = (Outcome.WEDGE.value, Outcome.REBOOT.value, Outcome.HANG.value, Outcome.POWER_LOSS.value)
PHASES = tuple(phase.value for phase in Phase)
STOP_RULES = tuple(kind.value for kind in StopKind)
# The keys each rule reads; any other key under ``stop:`` is a mistake worth one line.
STOP_KEYS: dict[StopKind, tuple[str, ...]] = {
    StopKind.FIXED_N: ("rule",),
    StopKind.FIRST_REPRODUCTION: ("rule", "confidence"),
    StopKind.SPRT: ("rule", "p0", "p1", "alpha", "beta"),
}
ALL_STOP_KEYS = tuple(dict.fromkeys(key for keys in STOP_KEYS.values() for key in keys))


def reproductions(doc: Doc, top: Any) -> tuple[Outcome, ...]:
    """``reproductions:``; by default wedge and reboot, since a hardware watchdog turns a lock into a reboot."""
    listed = top.get("reproductions", [o.value for o in DEFAULT_REPRODUCTIONS])
    listed = [listed] if isinstance(listed, str) else listed
    if not isinstance(listed, list) or not listed:
        raise doc.fail(top, "reproductions", "reproductions", f"must be a non-empty list of {', '.join(REPRODUCTION_OUTCOMES)}")
    for index, value in enumerate(listed):
        if value not in REPRODUCTION_OUTCOMES:
            raise doc.fail(listed, index, f"reproductions[{index}]",
                           f"must be one of {', '.join(REPRODUCTION_OUTCOMES)}, got {value!r}"
                           f"{did_you_mean(value, REPRODUCTION_OUTCOMES)}")
    return tuple(Outcome(value) for value in dict.fromkeys(listed))


def reference(doc: Doc, top: Any, cells: tuple[Cell, ...]) -> str:
    """``reference:`` names the cell every other is compared with; by default the first one."""
    if top.get("reference") is None:
        return cells[0].name
    value = top["reference"]
    names = tuple(cell.name for cell in cells)
    if value not in names:
        raise doc.fail(top, "reference", "reference",
                       f"must name a cell of the matrix, got {value!r}{did_you_mean(value, names)}")
    return str(value)


def check_reference_runs_every_attempt(doc: Doc, top: Any, reference_name: str) -> None:
    """A ``stop:`` on the reference cell is refused: every verdict leans on the reference's
    full count, so it never stops early (``Playbook.stop_rule`` would ignore the rule anyway)."""
    for index, entry in enumerate(top["matrix"]):
        if entry.get("name") == reference_name and entry.get("stop") is not None:
            raise doc.fail(entry, "stop", f"matrix[{index}].stop",
                           f"{reference_name!r} is the reference cell, and the reference cell never stops early "
                           "(every other cell is compared with its full count); move the rule to another cell")


def at_risk_phase(doc: Doc, top: Any) -> Phase | None:
    """``at_risk_phase:``: errors and hangs from this phase on count as non-reproductions."""
    value = top.get("at_risk_phase")
    if value is None:
        return None
    if value not in PHASES:
        raise doc.fail(top, "at_risk_phase", "at_risk_phase",
                       f"must be one of {', '.join(PHASES)}, got {value!r}{did_you_mean(value, PHASES)}")
    return Phase(value)


def max_excluded_share(doc: Doc, top: Any, default: float) -> float:
    """``max_excluded_share:`` in (0, 1]: above it a cell's rate is "cannot judge"."""
    if "max_excluded_share" not in top:
        return default
    value = top["max_excluded_share"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise doc.fail(top, "max_excluded_share", "max_excluded_share",
                       f"must be a share in (0, 1], e.g. 0.2 for 20%, got {value!r}")
    return float(value)


def fixed_ratio(doc: Doc, top: Any) -> float:
    """``fixed_ratio:`` in (0, 1): "fixed" needs the upper bound of the rate ratio (cell /
    reference) below it. The default was chosen by simulation (README, Verdicts): smaller is
    a stronger claim and needs more clean attempts (0.1: about 90 against a reference at 50%)."""
    if "fixed_ratio" not in top:
        return DEFAULT_FIXED_RATIO
    value = top["fixed_ratio"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise doc.fail(top, "fixed_ratio", "fixed_ratio",
                       f"must be a fraction in (0, 1), e.g. 0.33 for 'at most a third of the reference's rate', got {value!r}")
    return float(value)


EARLY = tuple(e.value for e in EarlyReproductions)


def early_reproductions(doc: Doc, top: Any) -> EarlyReproductions:
    """``early_reproductions: count | exclude``: a reproduction before ``at_risk_phase`` is
    counted and flagged in the verdict (the default), or excluded as another bug's."""
    value = top.get("early_reproductions", EarlyReproductions.COUNT.value)
    if value not in EARLY:
        raise doc.fail(top, "early_reproductions", "early_reproductions",
                       f"must be one of {', '.join(EARLY)}, got {value!r}{did_you_mean(str(value), EARLY)}")
    return EarlyReproductions(value)


def stop_rule(doc: Doc, container: Any, key: str, path: str) -> StopRule:
    """``stop: {rule: ..., ...}`` (top level or in a cell) -> a StopRule, every value checked."""
    stop = container[key]
    if not isinstance(stop, dict):
        hint = f" (did you mean {{rule: {stop}}}?)" if stop in STOP_RULES else did_you_mean(stop, STOP_RULES)
        raise doc.fail(container, key, path, f"must be a mapping like {{rule: sprt, p0: 0.3, p1: 0.03}}, "
                                             f"got {stop!r}{hint}")
    doc.check_keys(stop, ALL_STOP_KEYS, path)
    if "rule" not in stop:
        raise doc.fail(container, key, f"{path}.rule", f"'rule' is required: one of {', '.join(STOP_RULES)}")
    rule = stop["rule"]
    if rule not in STOP_RULES:
        raise doc.fail(stop, "rule", f"{path}.rule",
                       f"must be one of {', '.join(STOP_RULES)}, got {rule!r}{did_you_mean(rule, STOP_RULES)}")
    kind = StopKind(rule)
    for name in stop:
        if name not in STOP_KEYS[kind]:
            raise doc.fail(stop, name, f"{path}.{name}", f"{name!r} does not apply to rule {rule}; "
                                                         f"it reads {', '.join(STOP_KEYS[kind][1:]) or 'nothing else'}")
    if kind is StopKind.FIRST_REPRODUCTION:
        return StopRule(kind, confidence=_share(doc, stop, "confidence", path, 0.95))
    if kind is StopKind.SPRT:
        return _sprt(doc, container, key, stop, path)
    return StopRule(kind)


def _sprt(doc: Doc, container: Any, key: str, stop: Any, path: str) -> StopRule:
    for required in ("p0", "p1"):
        if required not in stop:
            raise doc.fail(container, key, f"{path}.{required}",
                           f"rule sprt needs '{required}' (p0: the rate while the bug is there; p1 < p0: the rate that counts as fixed)")
    p0, p1 = _rate(doc, stop, "p0", path), _rate(doc, stop, "p1", path)
    if not p1 < p0:
        raise doc.fail(stop, "p1", f"{path}.p1", f"must be below p0 ({p0}): the rate that counts as fixed, got {p1}")
    alpha, beta = _share(doc, stop, "alpha", path, 0.05), _share(doc, stop, "beta", path, 0.2)
    if alpha + beta >= 1:
        raise doc.fail(stop, "beta", f"{path}.beta", f"alpha + beta must be below 1, got {alpha} + {beta}")
    try:
        fixed_n(p0, p1, alpha, beta)  # the cap is 3x this design: refuse one that does not exist
    except ValueError as exc:
        raise doc.fail(stop, "p1", f"{path}.p1", f"{exc}; widen the gap between p0 and p1") from None
    return StopRule(StopKind.SPRT, p0=p0, p1=p1, alpha=alpha, beta=beta)


def _number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float))


def _rate(doc: Doc, stop: Any, name: str, path: str) -> float:
    value = stop[name]
    if not _number(value) or not 0 <= value <= 1:
        raise doc.fail(stop, name, f"{path}.{name}", f"must be a rate in [0, 1], e.g. 0.3 for 30%, got {value!r}")
    return float(value)


def _share(doc: Doc, stop: Any, name: str, path: str, default: float) -> float:
    if name not in stop:
        return default
    value = stop[name]
    if not _number(value) or not 0 < value < 1:
        raise doc.fail(stop, name, f"{path}.{name}", f"must be a number in (0, 1), e.g. 0.05, got {value!r}")
    return float(value)

