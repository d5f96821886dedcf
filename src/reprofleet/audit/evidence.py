"""The auditor's own reading of the raw records: what each attempt could mean, by its own code.

The judge gives each attempt one role (``model.judging``, with the engine's phase orders);
the auditor does not ask it. It reads the campaign's rules from ``campaign.json`` itself
and derives, per attempt, only what a claim's preconditions need, in the worst case:

- ``reproduced``: an outcome the campaign lists as a reproduction (wedge, reboot, and
  power_loss only when listed), unless the forensics show an orderly shutdown;
- ``maybe_reproduced``: that, or an attempt that ended *inside* the phase at risk without
  getting through it: an error or a hang (maybe the bug caught short of a freeze) or an
  ``infra`` loss (the host lost with it: the campaign simulator models exactly these as
  hidden reproductions);
- ``counted``: the attempt ran (a slot that runs again ran nothing).

"Inside the phase at risk" needs no engine order: an attempt whose last phase *is* the
phase at risk was in it under every order; an error or hang whose record notes that capture
starts next (nothing printed between) is counted in capture's worst case too, as the README says. Each attempt also carries what it ran under
(campaign, PoC digest, image, its kernel/driver/CUDA/VBIOS as written or from its facts
snapshot, and how its GPU settings read back), so a comparison across them can be checked
against what its sentence names, and a claim about one stratum (``name@hash~driver 560.35.03``)
against the attempts that ran under it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from reprofleet.model.shutdown import orderly_shutdown
from reprofleet.records.reader import RecordedAttempt, read_attempts
from reprofleet.records.host_stack import LABELS, STACK_KEYS, software_stack
from reprofleet.records.identity import DEPARTED, STRATUM_MARK, cell_name

NO_MANIFEST_REPRODUCTIONS = ("wedge", "reboot")  # a folder without campaign.json: the playbook's default
OLD_MANIFEST_REPRODUCTIONS = ("wedge",)  # a manifest written before roles existed counted wedges only
RESTARTABLE = ("wedge", "reboot")  # outcomes an orderly shutdown explains
FAILURES = ("error", "hang", "infra")  # ended without getting through: inside the phase at risk, maybe the bug
CAPTURE = "cuda_graph_capture"  # the phase a record's phase_note ("capture starts next") is at the edge of


@dataclass(frozen=True)
class Rules:
    """What a campaign counts, as its manifest says: the auditor's copy, read by its own code."""

    reproductions: frozenset[str]
    at_risk_phase: str | None = None
    early_excluded: bool = False  # early_reproductions: exclude (the judge may then count fewer)


@dataclass(frozen=True)
class Manifest:
    """The parts of a ``campaign.json`` that claims rest on."""

    campaign: str
    rules: Rules
    search: Mapping[str, Any] = field(default_factory=dict)  # the ladder block, raw ({} when none)


@dataclass(frozen=True)
class Attempt:
    """One attempt as the auditor reads it."""

    campaign: str
    attempt: str
    host: str
    cell: str  # the cell's name
    identity: str  # the cell identity it is pooled by
    outcome: str
    counted: bool  # it ran: not a slot that runs again
    reproduced: bool
    maybe_reproduced: bool
    failed_in_risk: bool  # an error, hang or lost host whose last phase is the phase at risk: what a worst case counts
    poc: str
    image: str
    driver: str  # "" when its facts snapshot is not found
    stack: Mapping[str, str | None] = field(default_factory=dict)  # kernel, driver, CUDA, VBIOS it ran under
    departures: str = ""  # how its GPU settings read back other than planned ("" when as planned)


@dataclass(frozen=True)
class Evidence:
    """Every attempt under a report's sources (each once) and their campaigns' manifests."""

    attempts: tuple[Attempt, ...]
    manifests: Mapping[str, Manifest]

    def of_identity(self, identity: str) -> tuple[Attempt, ...]:
        """The attempts a claim's identity covers: a stratum ``name@hash~driver 560.35.03`` (what
        they ran under, after the mark) covers those of its identity that ran under what it names."""
        base, _, label = identity.partition(STRATUM_MARK)
        return tuple(a for a in self.attempts if a.identity == base and a.counted and in_stratum(a, label))

    def of_cell(self, campaign: str, cell: str) -> tuple[Attempt, ...]:
        return tuple(a for a in self.attempts if a.campaign == campaign and a.cell == cell and a.counted)


def in_stratum(attempt: Attempt, label: str) -> bool:
    """Whether an attempt ran under what a stratum's label names: its settings read back as the
    label says (as planned where it says nothing), and each stack value it names ("driver 560.35.03,
    kernel ?"; "host stack unknown": no value known)."""
    parts = [p for p in label.split("; ") if p] if label else []
    read_back = next((p[len(DEPARTED):] for p in parts if p.startswith(DEPARTED)), "")
    if attempt.departures != read_back:
        return False
    for part in (p for p in parts if not p.startswith(DEPARTED)):
        if part == "host stack unknown":
            if any(attempt.stack.get(key) for key in STACK_KEYS):
                return False
            continue
        for item in part.split(", "):
            label_word, _, value = item.partition(" ")
            key = next((k for k, w in LABELS.items() if w == label_word), None)
            if key is None or (attempt.stack.get(key) or "?") != value:
                return False
    return True


def rules_of(manifest: Mapping[str, Any] | None) -> Rules:
    """A campaign's rules from its manifest (None: no manifest, the playbook's defaults)."""
    if manifest is None:
        return Rules(frozenset(NO_MANIFEST_REPRODUCTIONS))
    judging = manifest.get("judging")
    if not isinstance(judging, Mapping):
        listed = manifest.get("reproductions") or OLD_MANIFEST_REPRODUCTIONS
        return Rules(frozenset(str(o) for o in listed))
    phase = judging.get("at_risk_phase")
    return Rules(frozenset(str(o) for o in judging.get("reproductions") or OLD_MANIFEST_REPRODUCTIONS),
                 str(phase) if phase else None, judging.get("early_reproductions") == "exclude")


def _json(path: Path) -> Mapping[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, Mapping) else None


def _attempt_files(source: Path) -> list[Path]:
    return sorted(source.rglob("attempts.jsonl")) if source.is_dir() else [source] if source.exists() else []


def _last_phase(record: RecordedAttempt) -> str | None:
    return record.phases[-1] if record.phases else record.last_phase


def _image(runtime: Mapping[str, Any]) -> str:
    for key in ("image_digest", "image_id", "image", "label"):
        if runtime.get(key):
            return str(runtime[key])
    return ""


class _Stacks:
    """Each facts snapshot's stack, found by the hash a record names, in any source folder."""

    def __init__(self) -> None:
        self._folders: list[Path] = []
        self._seen: dict[str, Mapping[str, str | None]] = {}

    def add(self, folder: Path) -> None:
        if folder not in self._folders:
            self._folders.append(folder)

    def of(self, digest: str | None) -> Mapping[str, str | None]:
        """The stack a snapshot names (kernel, driver, CUDA, VBIOS; {} when not found)."""
        if not digest:
            return {}
        if digest not in self._seen:
            found = (_json(folder / "facts" / "by-hash" / f"{digest}.json") for folder in self._folders)
            snapshot = next((s for s in found if s is not None), None)
            self._seen[digest] = software_stack(snapshot) if snapshot else {}
        return self._seen[digest]


def attempt_of(record: RecordedAttempt, rules: Rules, snapshot: Mapping[str, str | None] | None = None) -> Attempt:
    """One record read by the auditor's rules (``snapshot``: the stack its facts snapshot names,
    where the record wrote none)."""
    outcome = record.outcome
    orderly = outcome in RESTARTABLE and orderly_shutdown(record.forensics) is not None
    reproduced = outcome in rules.reproductions and not orderly
    in_risk = rules.at_risk_phase is not None and _last_phase(record) == rules.at_risk_phase
    # an error or a hang whose log stopped right where capture starts, with nothing printed between
    # (the record's phase_note, "after kernel warmup; capture starts next"), may have stopped inside
    # capture: the README's rule counts it in the worst case, in every cell alike; a lost host there
    # is not (the host was lost, not the attempt seen failing)
    at_edge = rules.at_risk_phase == CAPTURE and bool(record.phase_note) and outcome in ("error", "hang")
    counted = not record.runs_again
    stack = record.stack if any(record.stack.values()) else (snapshot or {})
    failed = outcome in FAILURES and outcome not in rules.reproductions and (in_risk or at_edge) and counted
    return Attempt(record.campaign, record.attempt, record.host, cell_name(record.identity) or record.cell,
                   record.identity, outcome, counted, reproduced and counted, (reproduced or failed) and counted,
                   failed, record.poc or "", _image(record.runtime), str(stack.get("driver") or ""), stack,
                   ", ".join(record.settings_departures()))


def read_evidence(sources: Iterable[Path], reproductions: Iterable[str] = ()) -> Evidence:
    """Every attempt under ``sources`` (folders are searched), each attempt id once, with the
    manifests beside them; ``reproductions``: the outcomes a report was told to count instead
    of each campaign's own (``invoke report --reproductions``)."""
    override = frozenset(reproductions)
    records: dict[str, tuple[RecordedAttempt, Path]] = {}
    manifests: dict[str, Manifest] = {}
    stacks = _Stacks()
    for source in sources:
        for file in _attempt_files(Path(source)):
            stacks.add(file.parent)
            raw = _json(file.parent / "campaign.json")
            if raw is not None:
                name = str(raw.get("campaign") or file.parent.name)
                search = raw.get("search")
                manifests.setdefault(name, Manifest(name, rules_of(raw), search if isinstance(search, Mapping) else {}))
            for record in read_attempts(file):
                records.setdefault(record.attempt, (record, file))
    attempts = []
    for record, _ in records.values():
        manifest = manifests.get(record.campaign)
        rules = manifest.rules if manifest is not None else rules_of(None)
        if override:
            rules = Rules(override, rules.at_risk_phase, rules.early_excluded)
        attempts.append(attempt_of(record, rules, stacks.of(record.facts)))
    return Evidence(tuple(attempts), manifests)
