"""Campaign YAML -> a validated Playbook: top-level settings (name, PoC, attempts, timeouts, order).

Everything is checked before any host is contacted; the matrix of cells is read by
``cells``, their factors by ``factors``, and what the counts mean (reproductions, the
reference, ``stop:``) by ``judging``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from reprofleet.errors import Location, PlaybookError
from reprofleet.model import CACHE_MODES, BisectBlock, DEFAULT_MAX_EXCLUDED_SHARE, Cell, Playbook, Poc, StopRule, Timeouts, frozen_mapping
from reprofleet.suggest import did_you_mean, line_of, load_located_yaml

from reprofleet.playbook import builtin, env_secrets, judging, search as ladders
from reprofleet.playbook.cells import parse_cells
from reprofleet.playbook.document import MAX_COUNT, Doc, line_of_path, positive, shown, valid_name

TOP_KEYS = ("name", "description", "poc", "runtime", "attempts", "timeouts", "order", "seed",
            "reproductions", "reference", "at_risk_phase", "max_excluded_share", "fixed_ratio", "early_reproductions",
            "stop", "defaults", "matrix", "env_secrets", "env_secrets_identity", "hosts", "search", "bisect",
            "after_budget")
AFTER_BUDGET = ("cycle", "off")  # the first is the default
POC_KEYS = ("script", "cache", "cache_source")
TIMEOUT_KEYS = ("attempt", "boot", "connect", "nmi_reboot", "slurm_jobs")
ORDERS = ("blocks", "interleaved", "sequential", "shuffled")  # the first is the default


def load_playbook(path: str | Path, *, attempts_override: int | None = None, text: str | None = None) -> Playbook:
    """Read and validate a campaign; ``attempts_override`` replaces ``attempts`` (>= 1).

    ``text``: the YAML itself (a resume's stored copy), read as if it were the file at
    ``path``: the PoC and cache folder are found beside ``path``, errors name it.
    Every error names file, line and field: one raised without a line gets the line of the
    key its field path leads to.
    """
    try:
        return _load(path, attempts_override, text)
    except PlaybookError as exc:
        if exc.location.line is not None or exc.top is None:
            raise
        located = Location(exc.location.file, line_of_path(exc.top, exc.location.field) or 1, exc.location.field)
        raise PlaybookError(located, exc.reason) from None


def _load(path: str | Path, attempts_override: int | None, text: str | None) -> Playbook:
    if text is None:
        path = builtin.locate(path)  # a built-in name, or the default when the folder has no playbooks/
    file = str(path)
    if text is None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            names = builtin.builtin_names()
            known = f" (built-in playbooks, by name: {', '.join(names)})" if names else ""
            raise PlaybookError(Location(file), f"cannot read: {exc}{known}") from None
    doc = Doc(file)
    top = load_located_yaml(text, file, PlaybookError, reject_duplicates=True)
    if not isinstance(top, dict):
        got = "an empty file" if top is None else f"a {type(top).__name__}"
        raise PlaybookError(Location(file, line_of(top) or 1, "(document)"),
                            f"a playbook is a mapping of settings (name, poc, attempts, matrix ...), got {got}")
    try:
        return replace(_settings(doc, top, path, file, attempts_override), text=text)
    except PlaybookError as exc:
        exc.top = top  # lets the caller find a line for a value that has none
        raise


def _settings(doc: Doc, top: Any, path: str | Path, file: str, attempts_override: int | None) -> Playbook:
    doc.check_keys(top, TOP_KEYS, "")
    if attempts_override is not None and (isinstance(attempts_override, bool) or attempts_override < 1):
        raise PlaybookError(Location(file, None, "attempts"), f"attempts override must be >= 1, got {attempts_override}")
    ladder = ladders.ladder_key(doc, top)
    needed = ("name", "poc") + (("matrix",) if ladder is None else ())
    for required in needed + (("attempts",) if attempts_override is None and ladder is None else ()):
        if required not in top:
            raise PlaybookError(Location(file, line_of(top), required), f"'{required}' is required")
    folder = Path(path).resolve().parent
    seed = top.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not -(2**63) <= seed < 2**63):
        raise doc.fail(top, "seed", "seed", f"must be a 64-bit integer, got {shown(seed)}")
    name = valid_name(doc, top, "name", "name")
    poc = _poc(doc, top["poc"], folder)
    # a search's attempts per cell are the ladder's to choose: ``attempts`` (default 1) is only the fixed plan's
    attempts = attempts_override or (_count(doc, top, "attempts", "attempts") if ladder is None or "attempts" in top else 1)
    timeouts = _timeouts(doc, top.get("timeouts"))
    blocks: dict[str, Any] = {}
    if ladder is None:
        cells = _cache_modes(doc, top["matrix"], parse_cells(doc, top), poc)
        reference = judging.reference(doc, top, cells)
        judging.check_reference_runs_every_attempt(doc, top, reference)
    else:
        cells, reference, blocks[ladder] = _ladder_cells(doc, top, ladder, poc)
    return Playbook(
        name=name,
        path=str(Path(path).resolve()),
        poc=poc,
        attempts=attempts,
        timeouts=timeouts,
        cells=cells,
        order=_choice(doc, top, "order", "order", ORDERS, ORDERS[0]),
        after_budget=_choice(doc, top, "after_budget", "after_budget", AFTER_BUDGET, AFTER_BUDGET[0]),
        reproductions=judging.reproductions(doc, top),
        description=_description(doc, top),
        seed=seed,
        reference=reference,
        at_risk_phase=judging.at_risk_phase(doc, top),
        max_excluded_share=judging.max_excluded_share(doc, top, DEFAULT_MAX_EXCLUDED_SHARE),
        stop=judging.stop_rule(doc, top, "stop", "stop") if top.get("stop") is not None else StopRule(),
        fixed_ratio=judging.fixed_ratio(doc, top),
        early_reproductions=judging.early_reproductions(doc, top),
        env_secrets=env_secrets.env_secrets(doc, top, cells),
        env_secrets_identity=env_secrets.identity_flag(doc, top),
        hosts=_text(doc, top, "hosts", "hosts"),
        hosts_line=doc.at(top, "hosts", "hosts").line if "hosts" in top else None,
        **blocks,
    )


def _ladder_cells(doc: Doc, top: Any, key: str, poc: Poc) -> tuple[tuple[Cell, ...], str, Any]:
    """A search's or bisection's cells (one per level, built by the matrix's own code) and its
    reference: the safest level, or the known bad end (what a "fixed" verdict is measured against)."""
    block, entries = ladders.search_block(doc, top) if key == "search" else ladders.bisect_block(doc, top)
    try:
        cells = _cache_modes(doc, entries, parse_cells(doc, {**top, "matrix": entries}), poc)
    except PlaybookError as exc:
        raise ladders.located_error(exc, key, top[key]) from None
    names = tuple(cell.name for cell in cells)
    default = names[-1] if isinstance(block, BisectBlock) and not block.bad_first else names[0]
    if top.get("reference") is not None and top["reference"] not in names:
        raise doc.fail(top, "reference", "reference", f"must name a level's cell, got {top['reference']!r}"
                                                      f"{did_you_mean(top['reference'], names)}")
    return cells, str(top.get("reference") or default), block


def _text(doc: Doc, mapping: Any, key: str, path: str) -> Any:
    value = mapping.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise doc.fail(mapping, key, path, f"must be a non-empty string, got {value!r}")
    return value


def _description(doc: Doc, top: Any) -> str:
    value = top.get("description")
    if value is not None and not isinstance(value, str):
        raise doc.fail(top, "description", "description", f"must be text, got {value!r}")
    return value or ""


def _count(doc: Doc, mapping: Any, key: str, path: str) -> int:
    value = mapping.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        raise doc.fail(mapping, key, path, f"must be a whole number >= 1 and <= {MAX_COUNT}, got {shown(value)}")
    return value


def _choice(doc: Doc, mapping: Any, key: str, path: str, choices: tuple[str, ...], default: str) -> str:
    value = mapping.get(key, default)
    if value not in choices:
        raise doc.fail(mapping, key, path, f"must be one of {', '.join(choices)}, got {value!r}{did_you_mean(value, choices)}")
    return str(value)


def _poc(doc: Doc, poc: Any, folder: Path) -> Poc:
    doc.check_keys(poc, POC_KEYS, "poc")
    if poc.get("script") is None:  # absent, or `script:` with nothing after it
        raise PlaybookError(Location(doc.file, line_of(poc, "script") or line_of(poc), "poc.script"),
                            "'poc.script' is required")
    script = _inside(doc, poc, "script", "poc.script", folder)
    if not script.is_file():
        raise doc.fail(poc, "script", "poc.script", f"no such file: {script}")
    source = _inside(doc, poc, "cache_source", "poc.cache_source", folder) if poc.get("cache_source") is not None else None
    if source is not None and not source.is_dir():
        raise doc.fail(poc, "cache_source", "poc.cache_source", f"no such folder: {source}")
    mode = _choice(doc, poc, "cache", "poc.cache", CACHE_MODES, CACHE_MODES[0])
    if mode == "seeded" and source is None:
        raise doc.fail(poc, "cache", "poc.cache", "'seeded' starts every attempt from poc.cache_source: name that folder")
    return Poc(script=str(script), cache=mode, cache_source=None if source is None else str(source))


def _inside(doc: Doc, poc: Any, key: str, path: str, folder: Path) -> Path:
    """``poc.<key>`` joined to the playbook's folder, links resolved: it must stay in that folder.

    A playbook is shared text; what it names is pushed to every host (the script, the cache
    folder). ``../../.ssh``, an absolute path or a link out of the folder would send the
    operator's own files, so each is refused at its line."""
    named = _text(doc, poc, key, path)
    resolved = (folder / named).resolve()
    if not resolved.is_relative_to(folder):
        raise doc.fail(poc, key, path, f"{named!r} leads outside the playbook's folder {folder} (to {resolved}): "
                                       "a playbook reaches only files beside it")
    return resolved


def _cache_modes(doc: Doc, matrix: Any, cells: tuple[Cell, ...], poc: Poc) -> tuple[Cell, ...]:
    """A cell's own ``cache:``. Only a mode other than the playbook's joins the cell's
    factors (and so its identity): ids of cells that say nothing stay as they were."""
    out = []
    for entry, cell in zip(matrix, cells):
        path = f"matrix[{cell.index}].cache"
        mode = _choice(doc, entry, "cache", path, CACHE_MODES, poc.cache)
        if mode == "seeded" and poc.cache_source is None:
            raise doc.fail(entry, "cache", path, "'seeded' starts every attempt from poc.cache_source: name that folder")
        out.append(cell if mode == poc.cache else
                   replace(cell, cache=mode, factors=frozen_mapping({**cell.factors, "cache": mode})))
    return tuple(out)


def _timeouts(doc: Doc, timeouts: Any) -> Timeouts:
    if timeouts is None:
        return Timeouts()
    doc.check_keys(timeouts, TIMEOUT_KEYS, "timeouts")
    seconds = {key: positive(doc, timeouts, key, f"timeouts.{key}") for key in timeouts}
    return Timeouts(**seconds)

