"""A resume is the same experiment: ``invoke campaign --resume FOLDER`` runs what the folder ran.

``campaign.json`` keeps a copy of the playbook (its text as loaded, and its sha256), and the
sha256 of the PoC and of the inventory (``records/manifest.py``). A resume:

- refuses a folder that does not exist or holds no ``campaign.json`` (exit status 2, nothing
  created): a typo must not plan a whole new campaign where the old one should go on;
- runs the stored copy, rebuilt from its text with its paths resolved as the original's were
  (the PoC beside where the playbook was), unless ``--playbook`` names one;
- compares what it would run with what was stored: the playbook (an explicit ``--playbook``
  whose cells or settings differ), the PoC (the file the playbook names, against the stored
  digest) and the inventory (its hosts' names, groups and variables). A difference is refused
  in one line that names the file, both digests and what changed (cells added, removed or
  changed; settings; hosts), unless the person passes ``--resume-changed``: then each change
  is a ``resume_changed`` event, the manifest stores the new inputs, and every cell whose
  identity changed (its factors or runtime, or the PoC) runs its plan afresh under its new
  identity; its earlier records and stops no longer count for it (records/history.py), and a
  report pools the two identities apart (their ``cell_id`` differ);
- resumes a folder whose manifest predates the copy as before, with a warning that the
  playbook could not be checked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

from reprofleet.errors import PlaybookError, ReprofleetError, UsageError
from reprofleet.inventory import Inventory
from reprofleet.model import Cell, Host, Playbook
from reprofleet.playbook import load_playbook
from reprofleet.records.history import read_history
from reprofleet.records.identity import content_hash
from reprofleet.records.manifest import (StoredFile, StoredInputs, StoredInventory, StoredPlaybook, read_inputs,
                                         sha256_hex)
from reprofleet.records.reader import RecordedAttempt
from reprofleet.records.store import CampaignDir
from reprofleet.runner.context import cell_identity, record_runtime

CHANGED_FLAG = "--resume-changed"
# The playbook settings a resume compares (a cell's factors and runtime are its identity, compared apart).
SETTINGS = ("name", "attempts", "timeouts", "order", "seed", "reproductions", "reference", "at_risk_phase",
            "max_excluded_share", "stop", "fixed_ratio", "early_reproductions", "env_secrets",
            "env_secrets_identity", "hosts", "search", "bisect")


class ResumeRefused(UsageError):
    """A ``--resume`` that would not continue the same experiment (exit status 2, nothing run)."""


@dataclass(frozen=True)
class InputChange:
    """One input of a resume that differs from what the campaign stored."""

    what: str  # "playbook" | "poc" | "inventory"
    path: str
    before: str  # the stored sha256
    after: str  # the sha256 now
    added: tuple[str, ...] = ()  # cells (playbook) or hosts (inventory)
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()  # cells whose identity changed, or hosts whose variables did
    settings: tuple[str, ...] = ()  # the playbook's settings that differ
    new_identity: tuple[str, ...] = ()  # cells that run under a new identity because of this change

    def line(self) -> str:
        """One line a person reads: which file, which digests, what changed."""
        parts = [f"{self.what} {self.path}: sha256 {self.before[:12]} stored, {self.after[:12]} now"]
        noun = "hosts" if self.what == "inventory" else "cells"
        for verb, names in (("added", self.added), ("removed", self.removed), ("changed", self.changed)):
            if names:
                parts.append(f"{noun} {verb}: {', '.join(names)}")
        if self.settings:
            parts.append(f"settings changed: {', '.join(self.settings)}")
        if self.what == "poc":
            parts.append("every cell would run under a new identity")
        elif len(parts) == 1:
            parts.append("no cell, setting or host differs (only comments or layout)")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "path": self.path, "before": self.before, "after": self.after,
                "added": list(self.added), "removed": list(self.removed), "changed": list(self.changed),
                "settings": list(self.settings), "new_identity": list(self.new_identity)}


@dataclass(frozen=True)
class Resumed:
    """What a resume runs: the folder, the playbook, and the changes a person accepted."""

    directory: CampaignDir
    playbook: Playbook
    changes: tuple[InputChange, ...] = ()
    warning: str | None = None  # said before it runs (a manifest without the stored copy)


def campaign_folder(path: Path) -> CampaignDir:
    """The folder ``--resume`` names, refused unless it is a campaign's (it holds campaign.json)."""
    if not path.is_dir():
        raise ResumeRefused(f"--resume {path}: no such campaign folder; nothing was run or created "
                            "(a new campaign runs without --resume)")
    directory = CampaignDir(path)
    if not directory.manifest.is_file():
        raise ResumeRefused(f"--resume {path}: not a campaign folder (no campaign.json); nothing was run or created")
    return directory


def resumed_playbook(directory: CampaignDir, given: str | None, default: str,
                     attempts: int | None) -> tuple[Playbook, StoredInputs | None]:
    """The playbook a resume runs (the stored copy, or ``given``), and the stored inputs."""
    stored = read_inputs(directory.manifest)
    if stored is None or given is not None:
        return load_playbook(given or default, attempts_override=attempts), stored
    return load_playbook(stored.playbook.path, attempts_override=attempts, text=stored.playbook.text), stored


def current_inputs(book: Playbook, inventory: Inventory) -> StoredInputs:
    """What this run would store: the playbook's text, the PoC's and the inventory's digests."""
    poc = Path(book.poc.script)
    try:
        poc_digest = sha256_hex(poc.read_bytes())
    except OSError as exc:
        raise ReprofleetError(f"{book.path}: cannot read the PoC {poc}: {exc}") from None
    hosts = host_digests(inventory.hosts)
    return StoredInputs(
        StoredPlaybook(book.path, sha256_hex(book.text), book.text),
        StoredFile(str(poc), poc_digest),
        StoredInventory(str(inventory.source), inventory_digest(hosts), MappingProxyType(hosts)),
    )


def host_digests(hosts: Sequence[Host]) -> dict[str, str]:
    """Each host's digest: its name, groups and variables as the inventory defines them (the
    address, port, power ports and every var come from these; file:line locations do not count)."""
    return {host.name: sha256_hex(_canonical({"name": host.name, "groups": list(host.groups),
                                              "vars": dict(host.vars)})) for host in hosts}


def inventory_digest(hosts: Mapping[str, str]) -> str:
    return sha256_hex(_canonical(dict(sorted(hosts.items()))))


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))


def check(directory: CampaignDir, book: Playbook, stored: StoredInputs | None, now: StoredInputs, *,
          accept: bool, playbook_given: bool, attempts: int | None = None) -> Resumed:
    """``book`` against what ``directory`` stored: refused on a difference unless ``accept``
    (``attempts``: the --attempts both are read with, so that flag is no playbook change)."""
    if stored is None:
        return Resumed(directory, book, warning=(
            f"{directory.manifest}: no stored copy of the playbook (written by an older controller): "
            f"{book.path} could not be checked against what this campaign ran"))
    changes = differences(stored, now, book, stored_book(stored, attempts))
    if changes and accept:
        _refuse_unrecorded(directory, changes)
    if changes and not accept:
        renewed = [name for change in changes for name in change.new_identity]
        hint = ("resume without --playbook to run the stored copy, or " if playbook_given else "") + \
            f"pass {CHANGED_FLAG} to run it all the same" + \
            (f" ({', '.join(dict.fromkeys(renewed))} then run afresh under new identities)" if renewed else "")
        raise ResumeRefused(f"--resume {directory.root}: not the experiment this campaign ran: "
                            + " | ".join(c.line() for c in changes) + f"; nothing was run; {hint}")
    return Resumed(directory, book, changes)


def _refuse_unrecorded(directory: CampaignDir, changes: Sequence[InputChange]) -> None:
    """An attempt a dead controller started of a cell whose identity changes, not recorded yet:
    recording it needs the cell it ran, so the unchanged resume goes first."""
    renewed = {name for change in changes for name in change.new_identity}
    history = read_history(directory)
    recorded = history.recorded_ids()
    waiting = sorted({s.cell for s in history.started if s.cell in renewed and s.attempt not in recorded})
    if waiting:
        raise ResumeRefused(f"--resume {directory.root}: attempts a controller started of {', '.join(waiting)} are "
                            f"not recorded yet; resume once without {CHANGED_FLAG} (it records them), then with it")


def stored_book(stored: StoredInputs, attempts: int | None = None) -> Playbook | PlaybookError:
    """The stored copy as a Playbook (its PoC resolved beside where it was), or why it no longer loads."""
    try:
        return load_playbook(stored.playbook.path, attempts_override=attempts, text=stored.playbook.text)
    except PlaybookError as exc:
        return exc


def differences(stored: StoredInputs, now: StoredInputs, book: Playbook,
                before: Playbook | PlaybookError) -> tuple[InputChange, ...]:
    """Every input that differs, with what changed in it."""
    changes = []
    poc_changed = stored.poc.sha256 != now.poc.sha256
    if stored.playbook.sha256 != now.playbook.sha256:
        changes.append(_playbook_change(stored.playbook, now.playbook, book, before, now.poc.sha256))
    if poc_changed:
        changes.append(InputChange("poc", now.poc.path, stored.poc.sha256, now.poc.sha256,
                                   new_identity=tuple(c.name for c in book.cells)))
    if stored.inventory.sha256 != now.inventory.sha256:
        changes.append(_inventory_change(stored.inventory, now.inventory))
    return tuple(change for change in changes if change is not None)


def _playbook_change(stored: StoredPlaybook, now: StoredPlaybook, book: Playbook, before: Playbook | PlaybookError,
                     poc: str) -> InputChange:
    if isinstance(before, PlaybookError):  # the stored copy no longer loads: the digests are all it can say
        return InputChange("playbook", now.path, stored.sha256, now.sha256,
                           settings=(f"(the stored copy no longer loads: {before})",),
                           new_identity=tuple(c.name for c in book.cells))
    old = {c.name: c for c in before.cells}
    new = {c.name: c for c in book.cells}
    changed = tuple(n for n in new if n in old and cell_identity(new[n], poc) != cell_identity(old[n], poc))
    settings = [name for name in SETTINGS if getattr(before, name) != getattr(book, name)]
    settings += [f"poc.{key}" for key in ("cache", "cache_source") if getattr(before.poc, key) != getattr(book.poc, key)]
    settings += [f"stop of {n}" for n in new if n in old and n not in changed
                 and before.stop_rule(old[n]) != book.stop_rule(new[n])]
    return InputChange("playbook", now.path, stored.sha256, now.sha256,
                       added=tuple(n for n in new if n not in old), removed=tuple(n for n in old if n not in new),
                       changed=changed, settings=tuple(settings), new_identity=changed)


def _inventory_change(stored: StoredInventory, now: StoredInventory) -> InputChange:
    old, new = stored.hosts, now.hosts
    return InputChange("inventory", now.path, stored.sha256, now.sha256,
                       added=tuple(h for h in new if h not in old), removed=tuple(h for h in old if h not in new),
                       changed=tuple(h for h in new if h in old and new[h] != old[h]))


def belongs_to(book: Playbook, poc_digest: str) -> Callable[[RecordedAttempt], bool]:
    """Whether a record is of one of ``book``'s cells as they are now: the same name, factors
    and runtime, and the same PoC (a record from before records carried it: assumed so)."""
    cells: dict[str, Cell] = {cell.name: cell for cell in book.cells}
    keys = {name: (_factors_key(cell.factors), _runtime_key(record_runtime(cell))) for name, cell in cells.items()}

    def belongs(record: RecordedAttempt) -> bool:
        key = keys.get(record.cell)
        if key is None:
            return True  # not a cell of this plan: nothing of the plan counts it either way
        same_runtime = not record.runtime or _runtime_key(record.runtime) == key[1]
        return _factors_key(record.factors) == key[0] and same_runtime \
            and record.poc in (None, poc_digest)

    return belongs


def _factors_key(factors: Mapping[str, Any]) -> str:
    """Factors as a record's JSON line holds them (read-only mappings and tuples as JSON has them)."""
    return content_hash(_plain(factors), None, None)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _runtime_key(runtime: Mapping[str, Any]) -> tuple[Any, Any]:
    return runtime.get("kind"), runtime.get("label")
