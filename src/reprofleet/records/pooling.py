"""Records from many campaigns and controllers, pooled with what each campaign decided.

A report judges each record by its own campaign's rules (``campaign.json``: which outcomes
are reproductions, the phase at risk, the reference cell), so the same data gives the same
rate in a campaign's ``report.md`` and in any pooled report. The same attempt found twice
(two controllers' copies of one folder) counts once; the same attempt id with different
contents is an error that names both files, because one of them is wrong and a report
cannot know which.

Whether a report looks at a campaign's planned end is part of what it judges on (a look
before it needs anytime-valid numbers), so a campaign also brings its plan (attempts per
cell, hosts; from ``campaign.json``) and whether a controller holds it right now (its
``CampaignLock``). A folder without ``campaign.json`` is judged with the default
reproductions (wedge and reboot, as the playbook's own default) and says so in every
verdict that rests on it, never silently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from reprofleet.model import Judging, StopKind, StopRule
from reprofleet.stats.stop_rules import max_attempts
from reprofleet.records.reader import RecordedAttempt, attempts_of, read_attempts
from reprofleet.records.store import CampaignLock, RecordError, read_log_lines
from reprofleet.model.events import CampaignEvent, event_of

# Keys that may differ between two copies of one attempt without changing what it says.
VOLATILE_KEYS = ("stream",)


@dataclass(frozen=True)
class Plan:
    """What a campaign planned: every cell on every one of these hosts, this many times (a
    cell under a stop rule up to its rule's cap, ``slots``)."""

    attempts_per_cell: int
    hosts: tuple[str, ...]
    slots: Mapping[str, int] = field(default_factory=dict)  # cell name -> its slots per host, where not the default

    def of(self, cell: str) -> int:
        return self.slots.get(cell, self.attempts_per_cell)


@dataclass(frozen=True)
class CampaignInfo:
    """What a campaign's manifest says about judging its records.

    ``plan`` None: no plan is known, and the records are taken as the whole design (a
    bench's synthetic campaign; ``load_pool`` sets it from ``campaign.json`` and says so in
    ``caveat`` when the manifest has none). ``running``: a controller held the campaign's
    folder when it was read. ``caveat``: words every verdict resting on this campaign
    carries (a missing manifest)."""

    campaign: str
    judging: Judging
    reference: str | None = None
    cells: tuple[str, ...] = ()  # names in playbook order
    source: str = ""
    plan: Plan | None = None
    running: bool = False
    caveat: str = ""
    adaptive: str = ""  # "search" | "bisect": a ladder chose how often each cell ran (never a fixed-n design)
    budget: int | None = None  # such a campaign's attempt budget, where its playbook stated one


@dataclass(frozen=True)
class Pool:
    """Attempt records (each once), the campaigns they came from, and their stop events.

    Records given in their JSON form (a bench's synthetic ones) are read as typed records
    on the way in, so every reader of a pool reads attributes."""

    records: tuple[RecordedAttempt, ...]
    campaigns: Mapping[str, CampaignInfo] = field(default_factory=dict)
    stops: tuple[Mapping[str, Any], ...] = ()
    sources: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "records", attempts_of(self.records))

    def judging_of(self, record: RecordedAttempt) -> Judging:
        """The record's own campaign's rules; the default ones (and a caveat, :meth:`info_of`)
        for a campaign this pool has no manifest of."""
        return self.info_of(record).judging

    def info_of(self, record: RecordedAttempt) -> CampaignInfo:
        return self.campaigns.get(record.campaign) or missing_manifest(record.campaign)

    def cell_order(self) -> list[str]:
        """Cell names in playbook order, campaign by campaign."""
        names: list[str] = []
        for info in self.campaigns.values():
            names += [n for n in info.cells if n not in names]
        return names

    def references(self) -> list[str]:
        return list(dict.fromkeys(i.reference for i in self.campaigns.values() if i.reference))


def missing_manifest(campaign: str) -> CampaignInfo:
    """A campaign whose ``campaign.json`` is not there: the playbook's default judging
    (reproductions wedge and reboot), and words that say so."""
    default = Judging()
    return CampaignInfo(campaign, default, caveat=f"campaign {campaign} has no campaign.json: judged with the default "
                        f"reproductions ({', '.join(o.value for o in default.reproductions)}) and no phase at risk; "
                        "--reproductions chooses them")


def _plan(data: Mapping[str, Any]) -> Plan | None:
    attempts, hosts = data.get("attempts_per_cell"), data.get("hosts")
    if not isinstance(attempts, int) or isinstance(attempts, bool) or not isinstance(hosts, list):
        return None
    names = tuple(str(h.get("name")) for h in hosts if isinstance(h, dict) and h.get("name"))
    slots = {}
    for cell in data.get("cells") or []:  # a cell identity a resume replaced (``superseded``) plans nothing more
        if isinstance(cell, dict) and isinstance(cell.get("stop"), dict) and not cell.get("superseded"):
            rule = StopRule.from_json(cell["stop"])
            if rule.kind is not StopKind.FIXED_N:
                slots[str(cell.get("name"))] = max_attempts(rule, attempts)
    return Plan(attempts, names, slots) if names else None


Running = Callable[[Path], bool]  # whether a controller holds a campaign folder now


def read_manifest(path: Path, running: Running = CampaignLock.held) -> CampaignInfo | None:
    """``running``: how to tell a running campaign (default: ask its lock; ``invoke status``,
    which must never touch the lock, reads what the controller wrote instead)."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RecordError(f"{path}: cannot read the campaign manifest: {exc}") from exc
    judging_data = data.get("judging")
    if judging_data is None and data.get("reproductions"):
        judging_data = {"reproductions": data["reproductions"]}  # written before roles existed
    cells = tuple(str(c.get("name")) for c in data.get("cells") or [] if isinstance(c, dict))
    plan = _plan(data)
    ladder = data.get("search") if isinstance(data.get("search"), dict) else {}
    name = str(data.get("campaign") or path.parent.name)
    return CampaignInfo(campaign=name,
                        judging=Judging.from_json(judging_data),
                        reference=data.get("reference") or (cells[0] if cells else None),
                        cells=cells, source=str(path), plan=plan, running=running(path.parent),
                        adaptive=str(ladder.get("kind") or ""), budget=_ladder_budget(ladder),
                        caveat="" if plan else f"campaign {name}'s campaign.json records no plan (attempts_per_cell, "
                                               "hosts): its records are taken as the whole design")


def _ladder_budget(ladder: Mapping[str, Any]) -> int | None:
    """A search's or bisection's attempt budget from the manifest's ``search`` block."""
    spec = ladder.get("spec")
    budget = spec.get("budget_attempts") if isinstance(spec, dict) else None
    return budget if isinstance(budget, int) and not isinstance(budget, bool) else None


def _stop_events(folder: Path) -> list[dict[str, Any]]:
    return [e for e in read_log_lines(folder / "events.jsonl") if event_of(e) is CampaignEvent.STOPPED]


def _attempt_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(path.rglob("attempts.jsonl"))
    if path.exists():
        return [path]
    raise RecordError(f"{path}: no such campaign folder or attempts file")


def _comparable(record: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in VOLATILE_KEYS}


def load_pool(paths: Iterable[Path], running: Running = CampaignLock.held) -> Pool:
    """Every attempts file under ``paths`` (folders are searched), with manifests and stops;
    ``running`` tells whether a campaign's controller still holds its folder (see read_manifest)."""
    seen: dict[str, tuple[RecordedAttempt, str]] = {}
    campaigns: dict[str, CampaignInfo] = {}
    stops: dict[str, Mapping[str, Any]] = {}
    sources: list[str] = []
    for path in paths:
        for file in _attempt_files(Path(path)):
            sources.append(str(file))
            info = read_manifest(file.parent / "campaign.json", running)
            if info is not None:
                campaigns.setdefault(info.campaign, info)
            for event in _stop_events(file.parent):
                stops.setdefault(json.dumps(event, sort_keys=True, default=str), event)
            for record in read_attempts(file):
                _add(seen, record, str(file))
    records = tuple(entry for entry, _ in seen.values())
    for entry in records:  # campaigns without a manifest: the default, and a caveat in every verdict
        campaigns.setdefault(entry.campaign, missing_manifest(entry.campaign))
    return Pool(records, campaigns, tuple(stops.values()), tuple(sources))


def _add(seen: dict[str, tuple[RecordedAttempt, str]], record: RecordedAttempt, file: str) -> None:
    attempt = str(record.line.get("attempt"))
    if attempt not in seen:
        seen[attempt] = (record, file)
        return
    earlier, earlier_file = seen[attempt]
    if _comparable(earlier) != _comparable(record):
        differing = sorted(k for k in set(earlier) | set(record)
                           if k not in VOLATILE_KEYS and earlier.get(k) != record.get(k))
        raise RecordError(f"attempt {attempt} appears in {earlier_file} and in {file} with different "
                          f"contents ({', '.join(differing)}): one of them is wrong; remove one file from the report")
