"""Campaign YAML -> validated matrix cells, before any host is contacted.

A campaign runs for hours on machines that freeze, so a typo found after the first power
cycle costs an evening. Everything here is checked up front: unknown keys (with the
closest valid one suggested), value types and ranges, the PoC file, and every runtime
placeholder of every cell. Errors are PlaybookError at ``file:line:field.path``.

Factors merge in three layers: top-level ``runtime`` < ``defaults`` < the cell. ``env``,
``args``, ``vars`` and ``runtime`` merge key by key; a key set to ``null`` in a later layer
removes it (a cell can drop a default env flag); GPU factors set to ``null`` mean "leave
the card at its default".
"""

from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from reprofleet.errors import Location, PlaybookError
from reprofleet.model import (
    Cell,
    GpuPolicy,
    Host,
    Outcome,
    Playbook,
    Poc,
    Runtime,
    RuntimeKind,
    Timeouts,
    frozen_mapping,
)
from reprofleet.suggest import did_you_mean, line_of, load_located_yaml

TOP_KEYS = ("name", "description", "poc", "runtime", "attempts", "timeouts", "order", "seed",
            "reproductions", "defaults", "matrix")
POC_KEYS = ("script", "cache", "cache_source")
RUNTIME_KEYS = ("kind", "image", "docker_args", "python")
TIMEOUT_KEYS = ("attempt", "boot", "connect")
ORDERS = ("interleaved", "sequential", "shuffled")
CACHE_MODES = ("persistent", "fresh")
REPRODUCTION_OUTCOMES = (Outcome.WEDGE.value, Outcome.REBOOT.value, Outcome.HANG.value)
GPU_FACTORS = ("graphics_clocks", "memory_clocks", "power_limit", "persistence", "application_clocks")
MAP_FACTORS = ("env", "args", "vars", "runtime")
FACTOR_KEYS = GPU_FACTORS + MAP_FACTORS
CELL_KEYS = ("name", *FACTOR_KEYS)
NAME = re.compile(r"^[A-Za-z0-9._-]+$")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class _Set:
    """A validated value and where it was written."""

    value: Any
    where: Location


@dataclass
class _Layer:
    """One layer of factors (top-level runtime, defaults, or a cell), validated."""

    gpu: dict[str, _Set] = field(default_factory=dict)
    maps: dict[str, dict[str, _Set]] = field(default_factory=lambda: {k: {} for k in MAP_FACTORS})

    def over(self, base: _Layer) -> _Layer:
        merged = _Layer(gpu={**base.gpu, **self.gpu})
        for key in MAP_FACTORS:
            merged.maps[key] = {**base.maps[key], **self.maps[key]}
        return merged

    def values(self, key: str) -> dict[str, Any]:
        return {k: s.value for k, s in self.maps[key].items() if s.value is not None}


class _Doc:
    """The playbook file: builds locations from containers and dotted field paths."""

    def __init__(self, file: str) -> None:
        self.file = file

    def at(self, container: Any, key: Any, path: str) -> Location:
        return Location(self.file, line_of(container, key), path)

    def fail(self, container: Any, key: Any, path: str, message: str) -> PlaybookError:
        return PlaybookError(self.at(container, key, path), message)

    def check_keys(self, mapping: Any, allowed: tuple[str, ...], path: str) -> None:
        if not isinstance(mapping, dict):
            raise PlaybookError(Location(self.file, line_of(mapping), path or None), "must be a mapping")
        for key in mapping:
            if key not in allowed:
                where = f"{path}.{key}" if path else str(key)
                raise self.fail(mapping, key, where, f"unknown key {key!r}{did_you_mean(key, allowed)}")


def load_playbook(path: str | Path, *, attempts_override: int | None = None) -> Playbook:
    """Read and validate a campaign; ``attempts_override`` replaces ``attempts`` (>= 1)."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PlaybookError(Location(file), f"cannot read: {exc}") from None
    doc = _Doc(file)
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
        name=_name(doc, top, "name", "name"),
        path=str(Path(path).resolve()),
        poc=_poc(doc, top["poc"], folder),
        attempts=attempts_override or _count(doc, top, "attempts", "attempts"),
        timeouts=_timeouts(doc, top.get("timeouts")),
        cells=_cells(doc, top),
        order=_choice(doc, top, "order", "order", ORDERS, ORDERS[0]),
        reproductions=_reproductions(doc, top),
        description=_description(doc, top),
        seed=seed,
    )


# --- top-level settings --------------------------------------------------------------


def _name(doc: _Doc, mapping: Any, key: str, path: str) -> str:
    value = mapping.get(key)
    if not isinstance(value, str) or not NAME.match(value):
        raise doc.fail(mapping, key, path, f"must be letters, digits, '.', '_' or '-', got {value!r}")
    return value


def _text(doc: _Doc, mapping: Any, key: str, path: str) -> Any:
    value = mapping.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise doc.fail(mapping, key, path, f"must be a non-empty string, got {value!r}")
    return value


def _description(doc: _Doc, top: Any) -> str:
    value = top.get("description")
    if value is not None and not isinstance(value, str):
        raise doc.fail(top, "description", "description", f"must be text, got {value!r}")
    return value or ""


def _count(doc: _Doc, mapping: Any, key: str, path: str) -> int:
    value = mapping.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise doc.fail(mapping, key, path, f"must be a whole number >= 1, got {value!r}")
    return value


def _choice(doc: _Doc, mapping: Any, key: str, path: str, choices: tuple[str, ...], default: str) -> str:
    value = mapping.get(key, default)
    if value not in choices:
        raise doc.fail(mapping, key, path, f"must be one of {', '.join(choices)}, got {value!r}{did_you_mean(value, choices)}")
    return str(value)


def _poc(doc: _Doc, poc: Any, folder: Path) -> Poc:
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


def _timeouts(doc: _Doc, timeouts: Any) -> Timeouts:
    if timeouts is None:
        return Timeouts()
    doc.check_keys(timeouts, TIMEOUT_KEYS, "timeouts")
    seconds = {key: _positive(doc, timeouts, key, f"timeouts.{key}") for key in timeouts}
    return Timeouts(**seconds)


def _positive(doc: _Doc, mapping: Any, key: Any, path: str) -> float:
    value = mapping[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise doc.fail(mapping, key, path, f"must be a number > 0, got {value!r}")
    return float(value)


def _reproductions(doc: _Doc, top: Any) -> tuple[Outcome, ...]:
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


# --- factors -------------------------------------------------------------------------


def _cells(doc: _Doc, top: Any) -> tuple[Cell, ...]:
    base = _Layer()
    if top.get("runtime") is not None:
        base.maps["runtime"] = _runtime_layer(doc, top["runtime"], "runtime")
    defaults = top.get("defaults")
    if defaults is not None:
        doc.check_keys(defaults, FACTOR_KEYS, "defaults")
        base = _layer(doc, defaults, "defaults").over(base)
    matrix = top["matrix"]
    if not isinstance(matrix, list) or not matrix:
        raise doc.fail(top, "matrix", "matrix", "must be a non-empty list of cells")
    cells: list[Cell] = []
    for index, entry in enumerate(matrix):
        path = f"matrix[{index}]"
        if not isinstance(entry, dict):
            raise doc.fail(matrix, index, path, "a cell is a mapping with at least 'name'")
        doc.check_keys(entry, CELL_KEYS, path)
        if "name" not in entry:
            raise doc.fail(matrix, index, f"{path}.name", "every cell needs a 'name'")
        name = _name(doc, entry, "name", f"{path}.name")
        for earlier in cells:
            if earlier.name == name:
                raise doc.fail(entry, "name", f"{path}.name", f"cell name {name!r} is already used by matrix[{earlier.index}]")
        cells.append(_cell(doc, name, index, _layer(doc, entry, path).over(base)))
    return tuple(cells)


def _layer(doc: _Doc, mapping: Any, path: str) -> _Layer:
    layer = _Layer()
    for key in GPU_FACTORS:
        if key in mapping:
            parse = _GPU_PARSERS[key]
            layer.gpu[key] = _Set(parse(doc, mapping, key, f"{path}.{key}"), doc.at(mapping, key, f"{path}.{key}"))
    for key, check in (("env", _env_value), ("args", _arg_value), ("vars", _var_value)):
        if mapping.get(key) is not None:
            layer.maps[key] = _named_values(doc, mapping[key], f"{path}.{key}", check)
    if mapping.get("runtime") is not None:
        layer.maps["runtime"] = _runtime_layer(doc, mapping["runtime"], f"{path}.runtime")
    return layer


def _clocks(doc: _Doc, mapping: Any, key: str, path: str, ordered: bool = True) -> tuple[int, int] | None:
    value = mapping[key]
    if value is None:
        return None
    parts: Any = value.split(",") if isinstance(value, str) else value
    if isinstance(value, str):
        parts = [int(p) if p.strip().isdigit() else p for p in parts]
    if (not isinstance(parts, list) or len(parts) != 2
            or any(isinstance(p, bool) or not isinstance(p, int) or p <= 0 for p in parts)):
        raise doc.fail(mapping, key, path, f"must be two whole MHz values > 0 like [180, 2800] or \"180,2800\", got {value!r}")
    if ordered and parts[0] > parts[1]:
        raise doc.fail(mapping, key, path, f"minimum {parts[0]} is above maximum {parts[1]}")
    return (parts[0], parts[1])


def _application_clocks(doc: _Doc, mapping: Any, key: str, path: str) -> tuple[int, int] | None:
    return _clocks(doc, mapping, key, path, ordered=False)  # [memory, graphics]: no order


def _power_limit(doc: _Doc, mapping: Any, key: str, path: str) -> float | None:
    return None if mapping[key] is None else _positive(doc, mapping, key, path)


def _persistence(doc: _Doc, mapping: Any, key: str, path: str) -> bool | None:
    value = mapping[key]
    if value is not None and not isinstance(value, bool):
        raise doc.fail(mapping, key, path, f"must be true or false, got {value!r}")
    return value


_GPU_PARSERS: dict[str, Callable[[_Doc, Any, str, str], Any]] = {
    "graphics_clocks": _clocks,
    "memory_clocks": _clocks,
    "power_limit": _power_limit,
    "persistence": _persistence,
    "application_clocks": _application_clocks,
}


def _named_values(doc: _Doc, mapping: Any, path: str, check: Callable[[Any], Any]) -> dict[str, _Set]:
    """``env``/``args``/``vars``: identifier keys, values checked by ``check`` (None = remove)."""
    if not isinstance(mapping, dict):
        raise PlaybookError(Location(doc.file, line_of(mapping), path), "must be a mapping of NAME: value")
    checked: dict[str, _Set] = {}
    for key, value in mapping.items():
        where = doc.at(mapping, key, f"{path}.{key}")
        if not isinstance(key, str) or not IDENTIFIER.match(key):
            raise PlaybookError(where, f"{key!r} is not a name (letters, digits, '_'; not starting with a digit)")
        try:
            checked[key] = _Set(None if value is None else check(value), where)
        except ValueError as exc:
            raise PlaybookError(where, str(exc)) from None
    return checked


def _env_value(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"an environment value is text: quote it (e.g. \"1\"), got {value!r}")
    return str(value)


def _arg_value(value: Any) -> Any:
    if not isinstance(value, (str, int, float, bool)):
        raise ValueError(f"a PoC argument is a single value, got {value!r}")
    return value


def _var_value(value: Any) -> Any:
    if isinstance(value, float):
        raise ValueError(f"quote it: YAML reads an unquoted {value!r} as a number (0.10 becomes 0.1)")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"a template variable is text or a whole number, got {value!r}")
    return value


def _runtime_layer(doc: _Doc, runtime: Any, path: str) -> dict[str, _Set]:
    doc.check_keys(runtime, RUNTIME_KEYS, path)
    layer: dict[str, _Set] = {}
    for key, value in runtime.items():
        where = doc.at(runtime, key, f"{path}.{key}")
        if key == "kind" and value not in (k.value for k in RuntimeKind):
            kinds = tuple(k.value for k in RuntimeKind)
            raise PlaybookError(where, f"must be one of {', '.join(kinds)}, got {value!r}{did_you_mean(value, kinds)}")
        if key == "docker_args":
            value = _docker_args(doc, runtime, path)
        elif value is not None and (not isinstance(value, str) or not value):
            raise PlaybookError(where, f"must be a non-empty string, got {value!r}")
        layer[key] = _Set(value, where)
    return layer


def _docker_args(doc: _Doc, runtime: Any, path: str) -> list[str] | None:
    value = runtime["docker_args"]
    if value is None:
        return None
    if not isinstance(value, list):
        raise doc.fail(runtime, "docker_args", f"{path}.docker_args", "must be a list like [\"--ipc\", \"host\"]")
    for index, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise doc.fail(value, index, f"{path}.docker_args[{index}]", f"must be text, got {item!r}")
    return [str(item) for item in value]


# --- one cell ------------------------------------------------------------------------


def _cell(doc: _Doc, name: str, index: int, layer: _Layer) -> Cell:
    gpu = {key: layer.gpu[key].value if key in layer.gpu else None for key in GPU_FACTORS}
    env, args, template_vars = layer.values("env"), layer.values("args"), layer.values("vars")
    runtime = _runtime(layer.maps["runtime"], template_vars, f"cell {name!r} (matrix[{index}])")
    factors = {
        **{key: list(value) if isinstance(value, tuple) else value for key, value in gpu.items()},
        "env": dict(sorted(env.items())),
        "args": dict(sorted(args.items())),
        "vars": dict(sorted(template_vars.items())),
        "runtime": {"kind": runtime.kind.value, "image": runtime.image, "python": runtime.python,
                    "docker_args": list(runtime.docker_args)},
    }
    return Cell(
        name=name,
        index=index,
        factors=frozen_mapping(factors),
        gpu=GpuPolicy(gpu["graphics_clocks"], gpu["memory_clocks"], gpu["power_limit"],
                      gpu["persistence"], gpu["application_clocks"]),
        env=tuple(sorted(env.items())),
        args=tuple(sorted(args.items())),
        runtime=runtime,
    )


def _runtime(layer: Mapping[str, _Set], template_vars: Mapping[str, Any], cell: str) -> Runtime:
    """Kind (default: docker when an image is named), then placeholders from the cell's vars."""
    settings = {key: s for key, s in layer.items() if s.value is not None}
    kind_set = settings.get("kind")
    kind = RuntimeKind(kind_set.value) if kind_set else RuntimeKind.DOCKER if "image" in settings else RuntimeKind.PYTHON
    if kind is RuntimeKind.PYTHON:
        python = settings.get("python")
        return Runtime(kind, python=_fill(python, template_vars, cell) if python else None)
    if "image" not in settings and kind_set is not None:  # without a kind, no image means python
        raise PlaybookError(kind_set.where, f"{cell}: a docker runtime needs 'image'")
    docker_args = settings.get("docker_args")
    return Runtime(
        kind,
        image=_fill(settings["image"], template_vars, cell),
        docker_args=tuple(_fill(_Set(arg, docker_args.where), template_vars, cell) for arg in docker_args.value)
        if docker_args else (),
    )


def _fill(text: _Set, template_vars: Mapping[str, Any], cell: str) -> str:
    """``vllm/vllm-openai:v{vllm}`` -> ``...:v0.25.1``; only plain ``{name}`` placeholders."""
    try:
        pieces = list(string.Formatter().parse(text.value))
    except ValueError:
        raise PlaybookError(text.where, f"{cell}: unbalanced braces in {text.value!r} (write {{{{ for a literal brace)") from None
    filled = []
    for literal, name, spec, conversion in pieces:
        filled.append(literal)
        if name is None:
            continue
        if not IDENTIFIER.match(name) or spec or conversion:
            raise PlaybookError(text.where, f"{cell}: placeholder {{{name}}} must be a plain {{name}}")
        if name not in template_vars:
            raise PlaybookError(
                text.where, f"{cell} has no var {name!r} for {{{name}}}{did_you_mean(name, template_vars)}"
            )
        filled.append(str(template_vars[name]))
    return "".join(filled)


# --- order of attempts on one host ---------------------------------------------------


def plan_order(playbook: Playbook, host: str | Host) -> list[tuple[int, int]]:
    """(cell index, attempt index) pairs in the order one host runs them.

    interleaved: c0a0 c1a0 c2a0 c0a1 ... (drift in time hits every cell alike);
    sequential: every attempt of c0, then c1 ...; shuffled: a permutation fixed by
    ``seed`` and the host name, the same on every run (so a resumed campaign agrees),
    with attempt indexes still counting up within each cell.
    """
    name = host.name if isinstance(host, Host) else host
    cells, attempts = len(playbook.cells), playbook.attempts
    if playbook.order == "sequential":
        return [(c, a) for c in range(cells) for a in range(attempts)]
    if playbook.order == "interleaved":
        return [(c, a) for a in range(attempts) for c in range(cells)]
    sequence = [c for c in range(cells) for _ in range(attempts)]
    for i in range(len(sequence) - 1, 0, -1):  # Fisher-Yates on a hash stream: no RNG version drift
        digest = hashlib.sha256(f"{playbook.seed or 0}:{name}:{i}".encode()).digest()
        j = int.from_bytes(digest[:8], "big") % (i + 1)
        sequence[i], sequence[j] = sequence[j], sequence[i]
    seen = [0] * cells
    plan = []
    for c in sequence:
        plan.append((c, seen[c]))
        seen[c] += 1
    return plan
