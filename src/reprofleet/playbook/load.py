"""Campaign YAML -> a validated Playbook: top-level settings (name, PoC, attempts, timeouts).

Everything is checked before any host is contacted; the matrix of cells is read by
``cells`` and their factors by ``factors``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reprofleet.errors import Location, PlaybookError
from reprofleet.model import Outcome, Playbook, Poc, Timeouts
from reprofleet.suggest import did_you_mean, line_of, load_located_yaml

from .cells import parse_cells
from .document import Doc, positive, valid_name

TOP_KEYS = ("name", "description", "poc", "runtime", "attempts", "timeouts", "order", "seed",
            "reproductions", "defaults", "matrix")
POC_KEYS = ("script", "cache", "cache_source")
TIMEOUT_KEYS = ("attempt", "boot", "connect")
ORDERS = ("interleaved", "sequential", "shuffled")
CACHE_MODES = ("persistent", "fresh")
REPRODUCTION_OUTCOMES = (Outcome.WEDGE.value, Outcome.REBOOT.value, Outcome.HANG.value)


def load_playbook(path: str | Path, *, attempts_override: int | None = None) -> Playbook:
    """Read and validate a campaign; ``attempts_override`` replaces ``attempts`` (>= 1)."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PlaybookError(Location(file), f"cannot read: {exc}") from None
    doc = Doc(file)
    top = load_located_yaml(text, file, PlaybookError, reject_duplicates=True)
    doc.check_keys(top, TOP_KEYS, "")
    if attempts_override is not None and (isinstance(attempts_override, bool) or attempts_override < 1):
        raise PlaybookError(Location(file, None, "attempts"), f"attempts override must be >= 1, got {attempts_override}")
    for required in ("name", "poc", "matrix") + (("attempts",) if attempts_override is None else ()):
        if required not in top:
            raise PlaybookError(Location(file, line_of(top), required), f"'{required}' is required")
    folder = Path(path).resolve().parent
    seed = top.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise doc.fail(top, "seed", "seed", f"must be an integer, got {seed!r}")
    return Playbook(
        name=valid_name(doc, top, "name", "name"),
        path=str(Path(path).resolve()),
        poc=_poc(doc, top["poc"], folder),
        attempts=attempts_override or _count(doc, top, "attempts", "attempts"),
        timeouts=_timeouts(doc, top.get("timeouts")),
        cells=parse_cells(doc, top),
        order=_choice(doc, top, "order", "order", ORDERS, ORDERS[0]),
        reproductions=_reproductions(doc, top),
        description=_description(doc, top),
        seed=seed,
    )


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
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise doc.fail(mapping, key, path, f"must be a whole number >= 1, got {value!r}")
    return value


def _choice(doc: Doc, mapping: Any, key: str, path: str, choices: tuple[str, ...], default: str) -> str:
    value = mapping.get(key, default)
    if value not in choices:
        raise doc.fail(mapping, key, path, f"must be one of {', '.join(choices)}, got {value!r}{did_you_mean(value, choices)}")
    return str(value)


def _poc(doc: Doc, poc: Any, folder: Path) -> Poc:
    doc.check_keys(poc, POC_KEYS, "poc")
    if "script" not in poc:
        raise PlaybookError(Location(doc.file, line_of(poc), "poc.script"), "'poc.script' is required")
    script = folder / _text(doc, poc, "script", "poc.script")
    if not script.is_file():
        raise doc.fail(poc, "script", "poc.script", f"no such file: {script}")
    source = _text(doc, poc, "cache_source", "poc.cache_source")
    if source is not None and not (folder / source).is_dir():
        raise doc.fail(poc, "cache_source", "poc.cache_source", f"no such folder: {folder / source}")
    return Poc(
        script=str(script),
        cache=_choice(doc, poc, "cache", "poc.cache", CACHE_MODES, CACHE_MODES[0]),
        cache_source=None if source is None else str(folder / source),
    )


def _timeouts(doc: Doc, timeouts: Any) -> Timeouts:
    if timeouts is None:
        return Timeouts()
    doc.check_keys(timeouts, TIMEOUT_KEYS, "timeouts")
    seconds = {key: positive(doc, timeouts, key, f"timeouts.{key}") for key in timeouts}
    return Timeouts(**seconds)


def _reproductions(doc: Doc, top: Any) -> tuple[Outcome, ...]:
    listed = top.get("reproductions", [Outcome.WEDGE.value])
    listed = [listed] if isinstance(listed, str) else listed
    if not isinstance(listed, list) or not listed:
        raise doc.fail(top, "reproductions", "reproductions", f"must be a non-empty list of {', '.join(REPRODUCTION_OUTCOMES)}")
    for index, value in enumerate(listed):
        if value not in REPRODUCTION_OUTCOMES:
            raise doc.fail(listed, index, f"reproductions[{index}]",
                           f"must be one of {', '.join(REPRODUCTION_OUTCOMES)}, got {value!r}"
                           f"{did_you_mean(value, REPRODUCTION_OUTCOMES)}")
    return tuple(Outcome(value) for value in dict.fromkeys(listed))
