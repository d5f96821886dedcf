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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from reprofleet.model import Judging, StopKind, StopRule
from reprofleet.stats.stop_rules import max_attempts
from reprofleet.records.reader import RecordedAttempt, attempts_of, read_attempts
from reprofleet.records.host_stack import STACK_KEYS, software_stack, stack_words
from reprofleet.records.identity import STRATUM_MARK, departed_mark
from reprofleet.records.store import CampaignDir, CampaignLock, RecordError, read_facts_by_hash, read_log_lines
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
    order: str = ""  # the playbook's order (sequential: each cell's attempts in one block of time)


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

    def strata(self) -> dict[str, str]:
        """Each record's stratum (attempt id -> the identity it is counted under).

        A cell identity says what the controller planned; the host's kernel, driver, CUDA and
        VBIOS and the GPU settings read back say what it ran under. Records of one identity
        under different stacks are different experiments (a wedge under driver 610 says
        nothing of 612), so they are split: ``name@hash~driver 610.43``, naming only what
        differs between them, and a record no stack is known of (written before facts were
        kept by hash) is one stratum of its own, "host stack unknown". A record whose settings
        read back other than planned is always its own stratum, named by what read back, so
        a lock the owner left is never pooled with true defaults. An identity whose records
        all ran under one stack and as planned keeps its plain identity."""
        keys = {r.attempt: (_stack_key(r), r.settings_departures()) for r in self.records}
        variants: dict[str, set[tuple[tuple[str | None, ...], tuple[str, ...]]]] = {}
        for record in self.records:
            variants.setdefault(record.identity, set()).add(keys[record.attempt])
        out = {}
        for record in self.records:
            stack, departed = keys[record.attempt]
            stacks = {s for s, _ in variants[record.identity]}
            differing = tuple(k for i, k in enumerate(STACK_KEYS) if len({s[i] for s in stacks}) > 1)
            label = [stack_words(record.stack, differing)] if len(stacks) > 1 else []
            label += [departed_mark(departed)] if departed else []
            out[record.attempt] = f"{record.identity}{STRATUM_MARK}{'; '.join(label)}" if label else record.identity
        return out


def _stack_key(record: RecordedAttempt) -> tuple[str | None, ...]:
    return tuple(record.stack.get(key) for key in STACK_KEYS)


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
                        order=str(data.get("order") or ""),
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
                campaigns[info.campaign] = _shards_joined(campaigns.get(info.campaign), info)
            for event in _stop_events(file.parent):
                stops.setdefault(json.dumps(event, sort_keys=True, default=str), event)
            for record in read_attempts(file):
                _add(seen, _with_stack(record, file.parent), str(file))
    records = tuple(entry for entry, _ in seen.values())
    for entry in records:  # campaigns without a manifest: the default, and a caveat in every verdict
        campaigns.setdefault(entry.campaign, missing_manifest(entry.campaign))
    return Pool(records, campaigns, tuple(stops.values()), tuple(sources))


def _shards_joined(earlier: CampaignInfo | None, info: CampaignInfo) -> CampaignInfo:
    """One campaign's manifest, or its controller shards' (``invoke campaign --shards``: one
    campaign.json per shard sub-folder, each planning its own slice of the hosts) as one: the
    plan covers every shard's hosts, and the campaign runs while any shard does. Two copies of
    one folder plan the same hosts, so joining them changes nothing."""
    if earlier is None:
        return info
    plan = earlier.plan
    if plan is not None and info.plan is not None and plan.attempts_per_cell == info.plan.attempts_per_cell:
        plan = replace(plan, hosts=tuple(dict.fromkeys((*plan.hosts, *info.plan.hosts))))
    return replace(earlier, plan=plan, running=earlier.running or info.running)


def _with_stack(record: RecordedAttempt, folder: Path) -> RecordedAttempt:
    """The record with the stack it ran under: as it wrote it, else from the facts snapshot its
    ``facts`` hash names in its campaign folder; a record that names none stays unknown."""
    if record.stack or not record.facts:
        return record
    snapshot = read_facts_by_hash(CampaignDir(folder), record.facts)
    return replace(record, stack=software_stack(snapshot)) if snapshot is not None else record


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
