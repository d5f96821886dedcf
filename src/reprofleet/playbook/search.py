"""``search:`` and ``bisect:`` blocks -> a ladder of ordinary cells, one per level or version.

A level becomes a matrix entry that sets the one factor (``graphics_clocks: [floor, level]``,
``power_limit: level``, ``args: {NAME: level}``, ``vars: {vllm: "0.26.0"}`` ...) and is built by
the very code that builds matrix cells, so defaults, runtime placeholders, identities and
errors are the same. Each entry carries the line of its level, so a level the cell code
refuses is one line at ``search.levels[i]``.

``matrix:`` may not sit beside either block: the ladder's cells are the campaign, a search
compares levels with each other through its monotone model and has no use for a reference
cell (a shared setting goes in ``defaults:``). The reference the verdict table uses is the
safest level of a search and the known bad end of a bisection.
"""

from __future__ import annotations

import re
from typing import Any

from reprofleet.errors import Location, PlaybookError
from reprofleet.model import BisectBlock, SearchBlock
from reprofleet.suggest import LineMap, did_you_mean, line_of

from reprofleet.playbook.document import MAX_COUNT, MAX_MHZ, Doc, finite, positive, shown
from reprofleet.playbook.factors import IDENTIFIER

SEARCH_KEYS = ("factor", "levels", "riskier", "floor", "target", "epsilon_high", "budget", "groups", "costs")
BISECT_KEYS = ("factor", "versions", "known", "posterior", "target", "budget", "speculate", "costs", "min_rate",
               "groups")
TARGET_KEYS = ("epsilon", "delta")
BUDGET_KEYS = ("attempts", "power_cycles")
COST_KEYS = ("clean_s", "wedge_s")
SEARCH_FACTORS = ("graphics_clocks", "power_limit", "args.NAME", "env.NAME", "vars.NAME")
BISECT_FACTORS = ("vars.NAME", "runtime.image", "runtime.vllm")
DEFAULT_FLOOR_MHZ = 180  # the seed's -lgc 180,2800: the floor every ceiling of a clock search keeps
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def ladder_key(doc: Doc, top: Any) -> str | None:
    """``search`` or ``bisect`` when the playbook has one; both, or either beside ``matrix``, is refused."""
    present = [key for key in ("search", "bisect") if key in top]
    if len(present) == 2:
        raise doc.fail(top, "bisect", "bisect", "a playbook has one of search: and bisect:, not both")
    if present and top.get("stop") is not None:
        raise doc.fail(top, "stop", "stop", f"{present[0]}: decides itself when to stop (its target and budget): "
                                            "a stop: rule cannot sit beside it")
    if present and "matrix" in top:
        raise doc.fail(top, "matrix", "matrix", f"{present[0]}: makes the cells (one per level); matrix: cannot sit "
                                            "beside it (put settings every level shares in defaults:)")
    return present[0] if present else None


def search_block(doc: Doc, top: Any) -> tuple[SearchBlock, list[Any]]:
    """The block and its matrix entries, safest level first."""
    block = top["search"]
    doc.check_keys(block, SEARCH_KEYS, "search")
    factor = _factor(doc, block, "search", SEARCH_FACTORS)
    raw = _listed(doc, block, "levels", "search.levels")
    for index, value in enumerate(raw):
        if not finite(value, -1e18, 1e18):
            raise doc.fail(raw, index, f"search.levels[{index}]", f"a level is a number, got {shown(value)}")
        if index and not value > raw[index - 1]:
            what = "repeats" if value == raw[index - 1] else "is below"
            raise doc.fail(raw, index, f"search.levels[{index}]", f"levels are strictly increasing: {value!r} {what} "
                                                                  f"{raw[index - 1]!r} (riskier: says which end is risky)")
    riskier = block.get("riskier", "higher")
    if riskier not in ("higher", "lower"):
        raise doc.fail(block, "riskier", "search.riskier", f"must be higher or lower, got {riskier!r}"
                                                           f"{did_you_mean(riskier, ('higher', 'lower'))}")
    floor = _floor(doc, block, factor, raw)
    order = list(range(len(raw))) if riskier == "higher" else list(reversed(range(len(raw))))
    values = tuple(raw[i] for i in order)
    names = tuple(f"search-{_short(factor)}-{_text(v)}" for v in values)
    entries = [_entry(names[k], factor, values[k], raw, order[k], floor) for k in range(len(values))]
    epsilon, delta = _target(doc, block, "search")
    attempts, cycles = _budget(doc, block, "search")
    clean_s, wedge_s = _costs(doc, block, "search")
    high = block.get("epsilon_high", 0.5)
    if not finite(high, 0, 1) or not epsilon < high < 1:
        raise doc.fail(block, "epsilon_high", "search.epsilon_high",
                       f"must be a rate above target.epsilon ({epsilon:g}) and below 1, got {shown(high)}")
    return SearchBlock(factor, values, names, riskier, floor, epsilon, delta, float(high), attempts, cycles,
                       clean_s, wedge_s, _groups(doc, block)), entries


def bisect_block(doc: Doc, top: Any) -> tuple[BisectBlock, list[Any]]:
    """The block and its matrix entries, oldest version first."""
    block = top["bisect"]
    doc.check_keys(block, BISECT_KEYS, "bisect")
    factor = _factor(doc, block, "bisect", BISECT_FACTORS)
    raw = _listed(doc, block, "versions", "bisect.versions")
    if len(raw) < 2:
        raise doc.fail(block, "versions", "bisect.versions", "a bisection needs at least two versions (bad and good)")
    seen: dict[str, int] = {}
    for index, value in enumerate(raw):
        if isinstance(value, bool) or not isinstance(value, str) or not value.strip():
            hint = " (quote it: YAML reads 0.10 as 0.1)" if isinstance(value, float) else ""
            raise doc.fail(raw, index, f"bisect.versions[{index}]", f"a version is text, got {shown(value)}{hint}")
        if value in seen:
            raise doc.fail(raw, index, f"bisect.versions[{index}]", f"{value!r} repeats versions[{seen[value]}]")
        seen[value] = index
    if factor.startswith("vars."):
        _check_placeholder(doc, top, block, factor[5:])
    names = tuple(f"bisect-{_short(factor)}-{_text(v)}" for v in raw)
    if len(set(names)) != len(names):
        raise doc.fail(block, "versions", "bisect.versions", "two versions give the same cell name: " + ", ".join(names))
    entries = [_entry(names[i], factor, raw[i], raw, i, None) for i in range(len(raw))]
    known = block.get("known", {"bad": "first"})
    doc.check_keys(known, ("bad",), "bisect.known")
    if known.get("bad") not in ("first", "last"):
        raise doc.fail(known, "bad", "bisect.known.bad", f"must be first or last, got {known.get('bad')!r}")
    posterior = block.get("posterior", 0.95)
    if not finite(posterior, 0, 1) or not 0.5 < posterior < 1:
        raise doc.fail(block, "posterior", "bisect.posterior", f"must be a probability in (0.5, 1), got {shown(posterior)}")
    speculate = block.get("speculate", 0.5)
    if not finite(speculate, 0, 1):
        raise doc.fail(block, "speculate", "bisect.speculate",
                       f"must be a share in [0, 1] (0: every host always runs, 1: fewest attempts), got {shown(speculate)}")
    min_rate = block.get("min_rate", 0.2)
    if not finite(min_rate, 0, 1) or not 0 < min_rate < 1:
        raise doc.fail(block, "min_rate", "bisect.min_rate",
                       f"must be a rate in (0, 1): the lowest at which a bad version reproduces, got {shown(min_rate)}")
    epsilon, delta = _target(doc, block, "bisect")
    attempts, cycles = _budget(doc, block, "bisect")
    clean_s, wedge_s = _costs(doc, block, "bisect")
    return BisectBlock(factor, tuple(raw), names, known["bad"] == "first", float(posterior), epsilon, delta,
                       attempts, cycles, float(speculate), clean_s, wedge_s, float(min_rate),
                       _groups(doc, block, "bisect")), entries


def located_error(exc: PlaybookError, key: str, block: Any) -> PlaybookError:
    """A level's cell refused by the cell code: the same reason, at ``search.levels[i]``."""
    field = exc.location.field or ""
    match = re.match(r"matrix\[(\d+)\]", field)
    if not match:
        return exc
    listed = block.get("levels" if key == "search" else "versions")
    index = int(match.group(1))
    if key == "search" and block.get("riskier") == "lower":
        index = len(listed) - 1 - index
    where = f"{key}.{'levels' if key == 'search' else 'versions'}[{index}]"
    return PlaybookError(Location(exc.location.file, line_of(listed, index) or exc.location.line, where), exc.reason)


def _short(factor: str) -> str:
    return factor.split(".", 1)[1] if "." in factor and not factor.startswith("runtime.") else factor.replace("runtime.", "")


def _text(value: Any) -> str:
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return _UNSAFE.sub("_", text).strip("_") or "_"


def _factor(doc: Doc, block: Any, key: str, allowed: tuple[str, ...]) -> str:
    value = block.get("factor")
    if value is None:
        raise doc.fail(block, "factor", f"{key}.factor", f"'factor' is required: one of {', '.join(allowed)}")
    if isinstance(value, str):
        head, _, name = value.partition(".")
        plain = [a for a in allowed if "." not in a or a.startswith("runtime.")]
        if value in plain:
            return value
        if f"{head}.NAME" in allowed and IDENTIFIER.match(name or ""):
            return value
    raise doc.fail(block, "factor", f"{key}.factor", f"a {key} cannot set {shown(value)}: one of {', '.join(allowed)}"
                                                     f"{did_you_mean(str(value), allowed)}")


def _listed(doc: Doc, block: Any, name: str, path: str) -> Any:
    value = block.get(name)
    if not isinstance(value, list) or not value:
        raise doc.fail(block, name, path, f"must be a non-empty list, got {shown(value)}")
    return value


def _floor(doc: Doc, block: Any, factor: str, raw: list[Any]) -> int | None:
    if factor != "graphics_clocks":
        if "floor" in block:
            raise doc.fail(block, "floor", "search.floor", "floor applies only to factor graphics_clocks")
        return None
    floor = block.get("floor", DEFAULT_FLOOR_MHZ)
    if isinstance(floor, bool) or not isinstance(floor, int) or not 0 < floor <= MAX_MHZ:
        raise doc.fail(block, "floor", "search.floor", f"must be a whole MHz value in (0, {MAX_MHZ}], got {shown(floor)}")
    for index, level in enumerate(raw):
        if isinstance(level, bool) or not isinstance(level, int) or not floor < level <= MAX_MHZ:
            raise doc.fail(raw, index, f"search.levels[{index}]",
                           f"a clock ceiling is a whole MHz value above the floor {floor} and <= {MAX_MHZ}, got {shown(level)}")
    return floor


def _entry(name: str, factor: str, value: Any, listed: Any, index: int, floor: int | None) -> LineMap:
    """A matrix entry at the level's own line (so the cell code's errors point at it)."""
    entry = LineMap(name=name)
    if factor == "graphics_clocks":
        entry["graphics_clocks"] = [floor, value]
    elif factor == "power_limit":
        entry["power_limit"] = value
    else:
        head, name_ = factor.split(".", 1)
        entry[head] = LineMap({name_: value})
        entry[head].line = line_of(listed, index)
        entry[head].key_lines = {name_: line_of(listed, index) or 0}
    entry.line = line_of(listed, index)
    entry.key_lines = {key: line_of(listed, index) or 0 for key in entry}
    return entry


def _check_placeholder(doc: Doc, top: Any, block: Any, name: str) -> None:
    """``vars.NAME`` only sets something when a runtime field says ``{NAME}``: else every version
    would run the same software, and the bisection would find nothing."""
    texts: list[str] = []
    for layer in (top.get("runtime"), (top.get("defaults") or {}).get("runtime")):
        if isinstance(layer, dict):
            texts += [str(v) for v in layer.values() if isinstance(v, str)]
            texts += [str(v) for v in (layer.get("docker_args") or []) if isinstance(v, str)]
    if not any(f"{{{name}}}" in text for text in texts):
        raise doc.fail(block, "factor", "bisect.factor", f"no runtime field says {{{name}}}: vars.{name} would change "
                                                          "nothing the cells run (e.g. image: \"vllm/vllm-openai:v{" + name + "}\")")


def _target(doc: Doc, block: Any, key: str) -> tuple[float, float]:
    target = block.get("target", {})
    doc.check_keys(target, TARGET_KEYS, f"{key}.target")
    epsilon, delta = target.get("epsilon", 0.05), target.get("delta", 0.05)
    for name, value in (("epsilon", epsilon), ("delta", delta)):
        if not finite(value, 0, 1) or not 0 < value < 1:
            raise doc.fail(target, name, f"{key}.target.{name}", f"must be a rate in (0, 1), got {shown(value)}")
    return float(epsilon), float(delta)


def _budget(doc: Doc, block: Any, key: str) -> tuple[int | None, int | None]:
    budget = block.get("budget", {})
    doc.check_keys(budget, BUDGET_KEYS, f"{key}.budget")
    out: list[int | None] = []
    for name in BUDGET_KEYS:
        value = budget.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_COUNT):
            raise doc.fail(budget, name, f"{key}.budget.{name}", f"must be a whole number >= 1 and <= {MAX_COUNT}, "
                                                                 f"got {shown(value)}")
        out.append(value)
    return out[0], out[1]


def _costs(doc: Doc, block: Any, key: str) -> tuple[float, float]:
    costs = block.get("costs", {})
    doc.check_keys(costs, COST_KEYS, f"{key}.costs")
    clean = positive(doc, costs, "clean_s", f"{key}.costs.clean_s") if "clean_s" in costs else 120.0
    wedge = positive(doc, costs, "wedge_s", f"{key}.costs.wedge_s") if "wedge_s" in costs else 900.0
    return clean, wedge


def _groups(doc: Doc, block: Any, key: str = "search") -> tuple[tuple[str, str], ...]:
    """``groups: {PATTERN: STRATUM}``: a host name glob or an inventory group, the first match wins."""
    groups = block.get("groups")
    if groups is None:
        return ()
    if not isinstance(groups, dict) or not groups:
        raise doc.fail(block, "groups", f"{key}.groups", "must be a mapping of host pattern or group: stratum name")
    for pattern, stratum in groups.items():
        if not isinstance(pattern, str) or not isinstance(stratum, str) or not stratum:
            raise doc.fail(groups, pattern, f"{key}.groups.{pattern}", f"a stratum is a name, got {shown(stratum)}")
    return tuple((str(p), str(s)) for p, s in groups.items())
