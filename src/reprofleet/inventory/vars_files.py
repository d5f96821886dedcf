"""``group_vars/`` and ``host_vars/`` beside an inventory file, found and merged as Ansible does.

Fleet owners often keep per-group settings (PDU addresses, users) in these folders rather
than in the inventory itself, so reading only the inventory file would miss them.
"""

from __future__ import annotations

import os
from pathlib import Path

from reprofleet.errors import InventoryError, Location
from reprofleet.suggest import line_of, load_located_yaml

from reprofleet.inventory.values import YAML_SUFFIXES, InventoryLoader, Sourced, read_text


class VarsFiles:
    """``group_vars/<name>`` and ``host_vars/<name>`` beside the inventory, read once each."""

    def __init__(self, inventory_file: Path) -> None:
        self.shown = inventory_file.parent
        self.base = Path(os.path.realpath(inventory_file.parent))
        self.cache: dict[tuple[str, str], dict[str, Sourced]] = {}
        self.warnings: list[str] = []

    def vars(self, kind: str, name: str) -> dict[str, Sourced]:
        if (kind, name) not in self.cache:
            merged: dict[str, Sourced] = {}
            for path in self._files(kind, name):
                merged.update(self._read(path))
            self.cache[(kind, name)] = merged
        return self.cache[(kind, name)]

    def _files(self, kind: str, name: str) -> list[Path]:
        folder = self.base / kind
        if not folder.is_dir() or name.startswith("/"):
            return []
        for suffix in ("", *YAML_SUFFIXES):  # the first that exists wins, as in Ansible
            candidate = folder / f"{name}{suffix}"
            if candidate.is_dir():
                return _dir_vars_files(candidate)
            if candidate.exists():
                return [candidate]
        return []

    def _read(self, path: Path) -> dict[str, Sourced]:
        shown = str(self.shown / path.relative_to(self.base))
        text = read_text(path, shown)
        if text.startswith("$ANSIBLE_VAULT;"):
            self.warnings.append(f"{shown}: skipped: vault-encrypted vars file")
            return {}
        data = load_located_yaml(text, shown, InventoryError, loader=InventoryLoader)
        if data is None or data == {}:
            return {}
        if not isinstance(data, dict):
            raise InventoryError(Location(shown, line_of(data) or 1, "(document)"), "a vars file must be a mapping")
        return {str(k): Sourced(v, Location(shown, line_of(data, k), str(k))) for k, v in data.items()}


def _dir_vars_files(folder: Path) -> list[Path]:
    """Files of a ``group_vars/<name>/`` folder: sorted, recursive, no hidden or backups."""
    found: list[Path] = []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.startswith(".") or entry.name.endswith("~"):
            continue
        if entry.is_dir() and not entry.suffix:
            found.extend(_dir_vars_files(entry))
        elif entry.is_file() and entry.suffix in ("", *YAML_SUFFIXES):
            found.append(entry)
    return found
