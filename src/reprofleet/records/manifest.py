"""What ``campaign.json`` keeps of the inputs a campaign ran, read typed: a copy of its
playbook (the text as loaded, and its sha256), the sha256 of its PoC and of its inventory.

A resume runs the stored copy and checks the PoC and the inventory against their digests
(``campaign/resume.py``); this module only writes and reads the block. A manifest written
before the copy existed has no ``inputs``: :func:`read_inputs` answers None, and the resume
says that the playbook could not be checked.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from reprofleet.records.store import RecordError


def sha256_hex(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


@dataclass(frozen=True)
class StoredFile:
    """A file a campaign ran from: where it was, and the sha256 of what it held."""

    path: str
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256}


@dataclass(frozen=True)
class StoredPlaybook(StoredFile):
    """The playbook's own text as it was loaded (``sha256`` is of this text)."""

    text: str = ""

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "text": self.text}


@dataclass(frozen=True)
class StoredInventory(StoredFile):
    """The inventory as read (``sha256`` is of every host's name, groups and variables, so a
    script, a folder and group_vars count as what they define); ``hosts``: each host's own."""

    hosts: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "hosts": dict(sorted(self.hosts.items()))}


@dataclass(frozen=True)
class StoredInputs:
    """The ``inputs`` block of campaign.json."""

    playbook: StoredPlaybook
    poc: StoredFile
    inventory: StoredInventory

    def to_json(self) -> dict[str, Any]:
        return {"playbook": self.playbook.to_json(), "poc": self.poc.to_json(), "inventory": self.inventory.to_json()}


def read_inputs(manifest: Path) -> StoredInputs | None:
    """The inputs ``manifest`` stores; None when it predates them (no ``inputs`` key)."""
    try:
        data = json.loads(Path(manifest).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordError(f"{manifest}: cannot read the campaign manifest: {exc}") from None
    block = data.get("inputs") if isinstance(data, dict) else None
    if block is None:
        return None
    try:
        playbook, poc, inventory = block["playbook"], block["poc"], block["inventory"]
        hosts = inventory.get("hosts") or {}
        return StoredInputs(
            StoredPlaybook(_text(playbook, "path"), _text(playbook, "sha256"), _text(playbook, "text")),
            StoredFile(_text(poc, "path"), _text(poc, "sha256")),
            StoredInventory(_text(inventory, "path"), _text(inventory, "sha256"),
                            MappingProxyType({str(name): str(digest) for name, digest in hosts.items()})),
        )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise RecordError(f"{manifest}: inputs: not the shape this controller writes ({exc!r})") from None


def _text(block: Mapping[str, Any], key: str) -> str:
    value = block[key]
    if not isinstance(value, str):
        raise ValueError(f"{key} is not text")
    return value
