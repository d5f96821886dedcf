"""Factors of a cell: GPU settings, ``env``/``args``/``vars``, the runtime, and its placeholders.

Factors merge in three layers: top-level ``runtime`` < ``defaults`` < the cell. ``env``,
``args``, ``vars`` and ``runtime`` merge key by key; a key set to ``null`` in a later layer
removes it (a cell can drop a default env flag); GPU factors set to ``null`` mean "leave
the card at its default". Runtime placeholders (``{vllm}``) are filled from the cell's
merged ``vars`` here, so a missing var fails before the campaign starts.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from reprofleet.errors import Location, PlaybookError
from reprofleet.model import Runtime, RuntimeKind
from reprofleet.playbook.venv import VENV_KEYS, venv_option, venv_runtime
from reprofleet.suggest import did_you_mean, line_of

from reprofleet.playbook.document import MAX_MHZ, MAX_WATTS, Doc, finite, positive, shown
from reprofleet.playbook.host_debug import host_debug_values

RUNTIME_KEYS = ("kind", "image", "docker_args", "python") + VENV_KEYS
GPU_FACTORS = ("graphics_clocks", "memory_clocks", "power_limit", "persistence", "application_clocks")
MAP_FACTORS = ("env", "args", "vars", "runtime", "host_debug")
FACTOR_KEYS = GPU_FACTORS + MAP_FACTORS
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class _Set:
    """A validated value and where it was written."""

    value: Any
    where: Location


@dataclass
class Layer:
    """One layer of factors (top-level runtime, defaults, or a cell), validated."""

    gpu: dict[str, _Set] = field(default_factory=dict)
    maps: dict[str, dict[str, _Set]] = field(default_factory=lambda: {k: {} for k in MAP_FACTORS})

    def over(self, base: Layer) -> Layer:
        merged = Layer(gpu={**base.gpu, **self.gpu})
        for key in MAP_FACTORS:
            merged.maps[key] = {**base.maps[key], **self.maps[key]}
        return merged

    def values(self, key: str) -> dict[str, Any]:
        return {k: s.value for k, s in self.maps[key].items() if s.value is not None}


def read_layer(doc: Doc, mapping: Any, path: str) -> Layer:
    layer = Layer()
    for key in GPU_FACTORS:
        if key in mapping:
            parse = _GPU_PARSERS[key]
            layer.gpu[key] = _Set(parse(doc, mapping, key, f"{path}.{key}"), doc.at(mapping, key, f"{path}.{key}"))
    for key, check in (("env", _env_value), ("args", _arg_value), ("vars", _var_value)):
        if mapping.get(key) is not None:
            layer.maps[key] = _named_values(doc, mapping[key], f"{path}.{key}", check)
    if mapping.get("runtime") is not None:
        layer.maps["runtime"] = runtime_layer(doc, mapping["runtime"], f"{path}.runtime")
    if mapping.get("host_debug") is not None:
        checked = host_debug_values(doc, mapping["host_debug"], f"{path}.host_debug")
        layer.maps["host_debug"] = {key: _Set(value, where) for key, (value, where) in checked.items()}
    return layer


def _clocks(doc: Doc, mapping: Any, key: str, path: str, ordered: bool = True) -> tuple[int, int] | None:
    value = mapping[key]
    if value is None:
        return None
    parts: Any = value.split(",") if isinstance(value, str) else value
    if isinstance(value, str):
        parts = [int(p) if p.strip().isdigit() else p for p in parts]
    if (not isinstance(parts, list) or len(parts) != 2
            or any(isinstance(p, bool) or not isinstance(p, int) or not 0 < p <= MAX_MHZ for p in parts)):
        raise doc.fail(mapping, key, path, f"must be two whole MHz values in (0, {MAX_MHZ}] like [180, 2800] or "
                                           f"\"180,2800\", got {shown(value)}")
    if ordered and parts[0] > parts[1]:
        raise doc.fail(mapping, key, path, f"minimum {parts[0]} is above maximum {parts[1]}")
    return (parts[0], parts[1])


def _application_clocks(doc: Doc, mapping: Any, key: str, path: str) -> tuple[int, int] | None:
    return _clocks(doc, mapping, key, path, ordered=False)  # [memory, graphics]: no order


def _power_limit(doc: Doc, mapping: Any, key: str, path: str) -> float | None:
    return None if mapping[key] is None else positive(doc, mapping, key, path, MAX_WATTS, "W")


def _persistence(doc: Doc, mapping: Any, key: str, path: str) -> bool | None:
    value = mapping[key]
    if value is not None and not isinstance(value, bool):
        raise doc.fail(mapping, key, path, f"must be true or false, got {value!r}")
    return value


_GPU_PARSERS: dict[str, Callable[[Doc, Any, str, str], Any]] = {
    "graphics_clocks": _clocks,
    "memory_clocks": _clocks,
    "power_limit": _power_limit,
    "persistence": _persistence,
    "application_clocks": _application_clocks,
}


def _named_values(doc: Doc, mapping: Any, path: str, check: Callable[[Any], Any]) -> dict[str, _Set]:
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
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not finite(value, -1e18, 1e18):
        raise ValueError(f"a PoC argument that is a number is finite and below 1e18 in size, got {str(value)[:40]}")
    return value


def _var_value(value: Any) -> Any:
    if isinstance(value, float):
        raise ValueError(f"quote it: YAML reads an unquoted {value!r} as a number (0.10 becomes 0.1)")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"a template variable is text or a whole number, got {value!r}")
    if isinstance(value, int) and not finite(value, -1e18, 1e18):
        raise ValueError(f"a template variable that is a number is below 1e18 in size, got {str(value)[:40]}")
    return value


def runtime_layer(doc: Doc, runtime: Any, path: str) -> dict[str, _Set]:
    doc.check_keys(runtime, RUNTIME_KEYS, path)
    layer: dict[str, _Set] = {}
    for key, value in runtime.items():
        where = doc.at(runtime, key, f"{path}.{key}")
        if key == "kind" and value not in (k.value for k in RuntimeKind):
            kinds = tuple(k.value for k in RuntimeKind)
            raise PlaybookError(where, f"must be one of {', '.join(kinds)}, got {value!r}{did_you_mean(value, kinds)}")
        if key == "docker_args":
            value = _docker_args(doc, runtime, path)
        elif key in VENV_KEYS:
            value = venv_option(key, value, where)
        elif value is not None and (not isinstance(value, str) or not value):
            raise PlaybookError(where, f"must be a non-empty string, got {value!r}")
        layer[key] = _Set(value, where)
    return layer


def _docker_args(doc: Doc, runtime: Any, path: str) -> list[str] | None:
    value = runtime["docker_args"]
    if value is None:
        return None
    if not isinstance(value, list):
        raise doc.fail(runtime, "docker_args", f"{path}.docker_args", "must be a list like [\"--ipc\", \"host\"]")
    for index, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise doc.fail(value, index, f"{path}.docker_args[{index}]", f"must be text, got {item!r}")
    return [str(item) for item in value]


def runtime_for(layer: Mapping[str, _Set], template_vars: Mapping[str, Any], cell: str) -> Runtime:
    """Kind (default: docker when an image is named), then placeholders from the cell's vars."""
    settings = {key: s for key, s in layer.items() if s.value is not None}
    kind_set = settings.get("kind")
    kind = RuntimeKind(kind_set.value) if kind_set else RuntimeKind.DOCKER if "image" in settings else RuntimeKind.PYTHON
    if kind is RuntimeKind.VENV:
        return venv_runtime({k: (_fill(v, template_vars, cell) if isinstance(v.value, str) else v.value, v.where)
                             for k, v in settings.items() if k in VENV_KEYS}, kind_set, cell)
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
