"""The playbook's ``runtime: {kind: venv, vllm: ..., index_url|find_links|no_index|pins}``.

Checked where it is written, before anything runs: a vLLM version must lie within the
``poc`` extra's pin in ``pyproject.toml`` (the versions the project says it can drive).
"""

from __future__ import annotations

from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from reprofleet.errors import Location, PlaybookError
from reprofleet.model import PipOptions, Runtime, RuntimeKind


VENV_KEYS = ("vllm", "index_url", "find_links", "no_index", "pins")


def venv_option(key: str, value: Any, where: Location) -> Any:
    """One venv setting, checked where it is written (``file:line:runtime.key``)."""
    if value is None:
        return None
    if key == "no_index":
        if not isinstance(value, bool):
            raise PlaybookError(where, f"must be true or false, got {value!r}")
        return value
    if key in ("find_links", "pins"):
        items = [value] if key == "find_links" and isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
            raise PlaybookError(where, f"must be a list of non-empty strings, got {value!r}")
        return list(items)
    if isinstance(value, float):
        raise PlaybookError(where, f"quote it: YAML reads an unquoted {value!r} as a number")
    if not isinstance(value, str) or not value:
        raise PlaybookError(where, f"must be a non-empty string, got {value!r}")
    return value


def venv_runtime(values: Mapping[str, tuple[Any, Location]], kind: Any, cell: str) -> Runtime:
    """A ``kind: venv`` runtime: a vLLM version within the ``poc`` extra's pin, and pip's options."""
    if "vllm" not in values:
        raise PlaybookError(kind.where, f"{cell}: a venv runtime needs 'vllm' (a version such as \"0.25.1\")")
    version, where = values["vllm"]
    pin = poc_requirement()
    try:
        if not Requirement(pin).specifier.contains(Version(version), prereleases=True):
            raise PlaybookError(where, f"{cell}: vllm {version} is outside the poc extra's pin {pin!r} (pyproject.toml)")
    except InvalidVersion:
        raise PlaybookError(where, f"{cell}: {version!r} is not a version like \"0.25.1\"") from None
    get = {key: value for key, (value, _) in values.items()}
    return Runtime(RuntimeKind.VENV, vllm=version, pip=PipOptions(
        index_url=get.get("index_url"), find_links=tuple(get.get("find_links") or ()),
        no_index=bool(get.get("no_index")), pins=tuple(get.get("pins") or ())))


@lru_cache(maxsize=1)
def poc_requirement() -> str:
    """The ``poc`` extra's vLLM requirement (``vllm>=0.25``): the checkout's pyproject, else
    the installed package's metadata, else any vllm."""
    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    try:
        import tomllib

        extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
        found = [r for r in extras.get("poc", []) if Requirement(r).name == "vllm"]
        if found:
            return str(found[0])
    except (ImportError, OSError, KeyError, ValueError, InvalidRequirement):
        pass
    try:
        for text in metadata.requires("reprofleet") or ():
            requirement = Requirement(text)
            if requirement.name == "vllm" and requirement.marker and requirement.marker.evaluate({"extra": "poc"}):
                return f"vllm{requirement.specifier}"
    except (metadata.PackageNotFoundError, InvalidRequirement):
        pass
    return "vllm"
