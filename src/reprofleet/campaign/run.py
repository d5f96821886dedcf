"""The orchestrator: hosts in parallel, each through its cells in plan order; resume; stop.

One thread per host. A host that fails, freezes or is quarantined never holds the others
back. SIGINT/SIGTERM set the stop event: every host kills its running attempt (recorded as
``infra``, never clean), restores the GPU defaults, and the campaign returns.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import socket
import threading
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from types import MappingProxyType
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from reprofleet.clock import Clock, SystemClock
from reprofleet.credentials import resolve_env_secrets, secret_digest
from reprofleet.runner import cache_sync, gpu_policy, netconsole as netconsole_setup, poc, runtimes as runtime_truth
from reprofleet.remote.agent import load_bundle
from reprofleet.errors import ReprofleetError
from reprofleet.runner.context import CampaignContext, CampaignLedger, RunSettings, cell_identity
from reprofleet.runner.recovery import announce_power_control
from reprofleet.power.control import PowerControl
from reprofleet.runner.host import HostRunner
from reprofleet.runner.port import HostPort
from reprofleet.model import Cell, Host, Outcome, Playbook, SearchBlock, StopKind
from reprofleet.playbook import plan_order
from reprofleet.playbook.ladder import Ladder, LadderPlan, ladder_json, ladder_plan
from reprofleet.runner.search import LadderSchedule
from reprofleet.runner.slurm_node import SlurmNodes, SlurmTerms, slurm_power_problems
from reprofleet.inventory import SLURM_VARIABLE
from reprofleet.scheduler import SlurmClient
from reprofleet.stats.changepoint import bad_check_attempts
from reprofleet.records.disk_caps import CampaignDiskBudget
from reprofleet.records.history import CampaignHistory, history_of, read_history
from reprofleet.records.reader import RecordedAttempt, attempts_of, read_attempts
from reprofleet.records.store import CampaignDir, CampaignLock, iso_utc, read_log_lines, utc_now, write_atomic
from reprofleet.power import PowerLog
from reprofleet.power.ports import PowerPreflightError, outlet_keys
from reprofleet.liveness.watchdog import FleetLiveness
from reprofleet.liveness.probes import resolve
from reprofleet.liveness.silence_hold import segments_of
from reprofleet.liveness.witness import HostsSideWitness, campaign_guard, named_witnesses
from reprofleet.model.events import CampaignEvent
from reprofleet.campaign.left_off import switch_on_left_off
from reprofleet.campaign.metrics import CampaignMetrics
from reprofleet.campaign.observe import Ended, Observer, Watched, watching
from reprofleet.campaign.resume import InputChange, belongs_to
from reprofleet.campaign.shard_slices import ShardOf
from reprofleet.records.manifest import StoredInputs


@dataclass(frozen=True)
class CampaignPlan:
    campaign_id: str
    playbook: Playbook
    hosts: tuple[Host, ...]
    per_host: Mapping[str, tuple[tuple[Cell, int], ...]]
    inputs: StoredInputs | None = None  # the playbook's text, the PoC's and inventory's digests campaign.json keeps
    changes: tuple[InputChange, ...] = ()  # what a resume changed, by request (--resume-changed)
    shard: ShardOf | None = None  # a controller shard's run: its folder is <campaign>/shard-<i>

    @property
    def total_attempts(self) -> int:
        return sum(len(v) for v in self.per_host.values())

    def expected_duration_s(self, typical_attempt_s: float | None = None) -> float:
        """Wall time if every attempt ran to its timeout (hosts run in parallel): an upper bound."""
        each = typical_attempt_s or self.playbook.timeouts.attempt
        return max((len(v) for v in self.per_host.values()), default=0) * each

    def to_json(self) -> dict[str, Any]:
        """The dry run as data (``invoke campaign --dry-run --json``, docs/schema/campaign.schema.json):
        what :func:`describe_plan` says, item by item. Contacts nothing."""
        book = self.playbook
        env, args = _shared(book.cells, "env"), _shared(book.cells, "args")
        cells = [{"name": cell.name, "gpu": cell.gpu.as_dict(), "runtime": runtime_truth.describe(cell.runtime),
                  "stop_rule": book.stop_rule(cell).kind.value, "reference": cell.name == book.reference_cell.name,
                  "env": {k: v for k, v in cell.env if k not in env},
                  "args": {k: v for k, v in cell.args if k not in args}} for cell in book.cells]
        return {"campaign": self.campaign_id, "playbook": str(book.path), "playbook_name": book.name,
                "hosts": [{"name": h.name, "address": h.address, "port": h.port} for h in self.hosts],
                "env": env, "args": args, "cells": cells, "attempts_per_cell": book.attempts, "order": str(book.order),
                "planned": {h: len(v) for h, v in self.per_host.items()}, "total_attempts": self.total_attempts,
                "stop_rules_may_end_early": any(c["stop_rule"] != StopKind.FIXED_N.value for c in cells),
                "attempt_timeout_s": book.timeouts.attempt, "duration_upper_s": self.expected_duration_s(),
                "refusals": gpu_policy.refusals(book, self.hosts), "transfer": _transfer_lines(self)}


def new_campaign_id(playbook: Playbook) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{playbook.name}-{stamp}-{secrets.token_hex(2)}"


def make_plan(playbook: Playbook, hosts: Sequence[Host], campaign_id: str | None = None,
              done: Mapping[tuple[str, str], int] | None = None, *, inputs: StoredInputs | None = None,
              changes: Sequence[InputChange] = (), shard: ShardOf | None = None) -> CampaignPlan:
    """Each host's (cell, attempt index) sequence; attempts already recorded are skipped, and
    so are the cells an observe-only host refuses (``gpu_policy.refusal``: they ask for a setting).
    ``inputs``: what campaign.json keeps of the playbook, PoC and inventory; ``changes``: what a
    resume changed, by request; ``shard``: the controller shard this plan is the slice of."""
    done = done or {}
    per_host: dict[str, tuple[tuple[Cell, int], ...]] = {}
    if playbook.ladder is not None:  # a search's slots are chosen at run time: a host is prepared for every level
        return CampaignPlan(campaign_id or new_campaign_id(playbook), playbook, tuple(hosts),
                            {h.name: tuple((c, 0) for c in playbook.cells if gpu_policy.refusal(h, c) is None)
                             for h in hosts}, inputs, tuple(changes), shard)
    for host in hosts:
        order = plan_order(playbook, host.name)
        per_host[host.name] = tuple(
            (playbook.cells[c], k) for c, k in order if k >= done.get((host.name, playbook.cells[c].name), 0)
            and gpu_policy.refusal(host, playbook.cells[c]) is None
        )
    return CampaignPlan(campaign_id or new_campaign_id(playbook), playbook, tuple(hosts), per_host, inputs,
                        tuple(changes), shard)


def _shared(cells: Sequence[Cell], attr: str) -> dict[str, Any]:
    """Items every cell has with the same value (printed once, not per cell)."""
    dicts = [dict(getattr(cell, attr)) for cell in cells]
    return {k: v for k, v in dicts[0].items() if all(d.get(k, object()) == v for d in dicts[1:])} if dicts else {}


def describe_plan(plan: CampaignPlan) -> str:
    """The dry-run text: hosts, cells, attempts and the duration bound. Contacts nothing."""
    book = plan.playbook
    env, args = _shared(book.cells, "env"), _shared(book.cells, "args")
    lines = [
        f"campaign {plan.campaign_id}",
        f"playbook {book.path}",
        f"hosts ({len(plan.hosts)}): " + ", ".join(f"{h.name} ({h.address}:{h.port})" for h in plan.hosts),
        f"every cell: env {env}; args {args}",
        f"cells ({len(book.cells)}), {book.attempts} attempts each per host, order {book.order}:",
    ]
    for cell in book.cells:
        own_env = {k: v for k, v in cell.env if k not in env}
        own_args = {k: v for k, v in cell.args if k not in args}
        parts = [f"gpu {cell.gpu.as_dict() or 'default'}", f"runtime {runtime_truth.describe(cell.runtime)}"]
        rule = book.stop_rule(cell)
        parts += [f"stop {rule.kind.value}"] if rule.kind is not StopKind.FIXED_N else []
        parts += ["reference"] if cell.name == book.reference_cell.name else []
        parts += [f"env {own_env}"] if own_env else []
        parts += [f"args {own_args}"] if own_args else []
        lines.append(f"  - {cell.name}: " + "; ".join(parts))
    if book.ladder is not None:
        lines.append(search_lines(book))
    early = any(book.stop_rule(cell).kind is not StopKind.FIXED_N for cell in book.cells)
    lines.append(f"attempts planned: {plan.total_attempts} "
                 f"({', '.join(f'{h}: {len(v)}' for h, v in plan.per_host.items())})"
                 + ("; at most: a cell with a stop rule ends early on a host once its rule decides" if early else ""))
    lines += gpu_policy.refusals(book, plan.hosts)  # one line per (observe-only host, cell asking a setting)
    lines += _slurm_wait_lines(plan)
    hours = plan.expected_duration_s() / 3600
    lines.append(f"duration: at most {hours:.1f} h if every attempt ran to its {book.timeouts.attempt:g} s timeout "
                 "(plus power cycles and boots)")
    return "\n".join(lines + _transfer_lines(plan))


def _transfer_lines(plan: CampaignPlan) -> list[str]:
    """What travels to each host before its first attempt (the agent bundle, the PoC, a cache)."""
    bundle, poc_file = load_bundle(), Path(plan.playbook.poc.script)
    return list(cache_sync.transfer_lines(plan.playbook, plan.per_host, len(bundle.files),
                                          sum(len(b) for _, b in bundle.files),
                                          poc_file.stat().st_size if poc_file.exists() else 0))


def search_lines(book: Playbook) -> str:
    """What a dry run says of a search's or bisection's ladder (its slots are not known in advance)."""
    block = book.ladder
    assert block is not None
    budget = ", ".join(f"{n} {what}" for n, what in ((block.budget_attempts, "attempts"),
                                                     (block.budget_power_cycles, "power cycles")) if n) or "none"
    if isinstance(block, SearchBlock):
        levels = ", ".join(block.label(i) for i in range(len(block.cells)))
        return (f"search over {block.factor} (safest first: {levels}): each host's next level is chosen at run time "
                f"from every record so far; target P <= {block.epsilon:g} with probability >= {1 - block.delta:g}, "
                f"never probing a level likely above {block.epsilon_high:g}; budget {budget}; "
                "the counts below are one attempt per level, not the plan")
    bad = "oldest" if block.bad_first else "newest"
    return (f"bisect over {block.factor} ({', '.join(block.versions)}; the {bad} is the known bad): versions chosen at "
            f"run time until the change point's posterior reaches {block.posterior:g}; budget {budget}; "
            f"a bad version is assumed to reproduce at >= {block.min_bad_rate:g} (the known bad fails and the first "
            f"good passes after {bad_check_attempts(block.posterior, block.min_bad_rate)} clean runs); "
            f"a parallel host waits rather than run a probe worth under {block.speculate:g} of a fresh one; "
            "the counts below are one attempt per version, not the plan")


def runs_again(record: Mapping[str, Any]) -> bool:
    """An attempt that was interrupted or never run: its slot runs again on resume, and it
    counts for nothing (so a resumed campaign tallies and decides as an uninterrupted one).
    ``record``: typed, or its JSON line."""
    return RecordedAttempt.from_json(record).runs_again


def completed_counts(directory: CampaignDir, playbook: Playbook | None = None,
                     poc_digest: str | None = None) -> dict[tuple[str, str], int]:
    """Attempts per (host, cell) already done; interrupted or never-run ones run again on resume
    (attempts.jsonl alone: the plan of ``invoke campaign --resume`` is made from it). With
    ``playbook`` and ``poc_digest``, only records of its cells as they are now count (a cell a
    resume changed runs its plan afresh under its new identity).

    A cell that its stop rule ended keeps its remaining slots in the plan; the host runner
    skips them (its ``stopped`` event says so).
    """
    history = CampaignHistory(read_attempts(directory.attempts))
    if playbook is not None and poc_digest is not None:
        history = history.keeping(belongs_to(playbook, poc_digest))
    return history.completed_counts()


@dataclass(frozen=True)
class CampaignResult:
    campaign_id: str
    directory: CampaignDir
    records: tuple[RecordedAttempt, ...]
    interrupted: bool
    failure: str | None = None  # why the campaign stopped on its own (e.g. the controller's disk is full)
    quarantined: Mapping[str, str] = field(default_factory=dict)  # host -> why it stopped running its plan
    unjudged: tuple[str, ...] = ()  # cells with no judged attempt on any host (every record infra)
    given_back: Mapping[str, str] = field(default_factory=dict)  # host -> what it got back at the end, in words

    def to_json(self) -> dict[str, Any]:
        """How the campaign ended (``invoke campaign --json``'s ``result``)."""
        return {"campaign": self.campaign_id, "folder": str(self.directory.root),
                "records": str(self.directory.attempts), "attempts": len(self.records),
                "stopped_by_signal": self.interrupted, "failure": self.failure, "quarantined": dict(self.quarantined),
                "unjudged": list(self.unjudged), "given_back": dict(self.given_back)}


# One thing of a folder's history, read on its own (a test, or a tool that needs only it);
# run_campaign reads the whole history once (records/history.py).
def earlier_records(directory: CampaignDir) -> dict[str, list[RecordedAttempt]]:
    """Each host's records that count (``CampaignHistory.earlier``, from attempts.jsonl alone)."""
    return CampaignHistory(read_attempts(directory.attempts)).earlier()


def started_slots(directory: CampaignDir, playbook: Playbook) -> dict[str, tuple[Cell, int]]:
    """Attempt id -> (cell, attempt index) for every attempt this campaign started (its events)."""
    return history_of((), read_log_lines(directory.events)).started_slots(playbook)


def resolved_runtimes(directory: CampaignDir) -> dict[str, list[Mapping[str, Any]]]:
    """Host -> its ``runtime_resolved`` events so far, in order (what earlier controllers found)."""
    resolved = history_of((), read_log_lines(directory.events)).resolved
    return {host: list(events) for host, events in resolved.items()}


def stopped_cells(directory: CampaignDir) -> set[tuple[str, str]]:
    """(host, cell) pairs that already have a ``stopped`` event: a resume never runs them again."""
    return set(history_of((), read_log_lines(directory.events)).stopped)


def write_manifest(directory: CampaignDir, plan: CampaignPlan, controller: str, poc_digest: str,
                   secret_digests: Mapping[str, str] | None = None) -> None:
    """campaign.json: how this campaign judges and stops, for every report that reads it later,
    and the inputs it ran (a resume runs the same; campaign/resume.py). Written once; a resume
    that changed its inputs by request rewrites it (:func:`_changed_manifest`)."""
    manifest = _manifest(plan, controller, poc_digest, secret_digests)
    if directory.manifest.exists():
        if not plan.changes:
            return
        manifest = _changed_manifest(json.loads(directory.manifest.read_text(encoding="utf-8")), manifest, plan)
    write_atomic(directory.manifest, json.dumps(manifest, indent=2, default=str) + "\n")


def _manifest(plan: CampaignPlan, controller: str, poc_digest: str,
              secret_digests: Mapping[str, str] | None) -> dict[str, Any]:
    book = plan.playbook
    manifest: dict[str, Any] = {
        "campaign": plan.campaign_id,
        "playbook": plan.playbook.path,
        "controller": controller,
        "created": datetime.now(timezone.utc).isoformat(),
        "hosts": [{"name": h.name, "address": h.address, "port": h.port} for h in plan.hosts],
        # the planned identity; each record carries the one resolved on its host (image digest,
        # interpreter versions), which is what pooling and verdicts group by
        "cells": [{"name": c.name, "cell_id": cell_identity(c, poc_digest, secret_digests), "factors": dict(c.factors),
                   "stop": book.stop_rule(c).to_json()} for c in book.cells],
        "attempts_per_cell": book.attempts,
        "judging": book.judging.to_json(),
        "reference": book.reference_cell.name,
        "order": book.order,
        "seed": book.seed,
        "poc": poc_digest,
        "reproductions": [o.value for o in book.reproductions],  # for readers older than ``judging``
    }
    if book.ladder is not None:  # the report computes the search's result from the folder alone
        manifest["search"] = ladder_json(ladder_plan(book.ladder, plan.hosts, book.seed))
    if plan.inputs is not None:
        manifest["inputs"] = plan.inputs.to_json()
    return manifest


def _changed_manifest(before: Mapping[str, Any], now: dict[str, Any], plan: CampaignPlan) -> dict[str, Any]:
    """The manifest of a resume that ran changed inputs by request: the new plan's, the same
    campaign and creation time, every earlier cell identity kept (``superseded``: its records
    stay in the folder and in reports, apart from the new one's), and the changes listed."""
    current = {cell["cell_id"] for cell in now["cells"]}
    earlier = [{**cell, "superseded": True} for cell in before.get("cells") or []
               if isinstance(cell, dict) and cell.get("cell_id") not in current]
    change = {"t": utc_now(), "changes": [c.to_json() for c in plan.changes]}
    return {**now, "campaign": before.get("campaign", now["campaign"]), "created": before.get("created", now["created"]),
            "cells": now["cells"] + earlier, "changes": [*(before.get("changes") or []), change]}


def fleet_liveness(hosts: Sequence[Host], settings: RunSettings, power_log: PowerLog, clock: Clock,
                   network_ok: Callable[[], bool] | None = None) -> FleetLiveness:
    """The campaign's shared liveness: its partition guard (one, built once, asked in the
    background), each host's segment and hosts-side witnesses for the correlated-silence hold."""
    guard = network_ok or campaign_guard(hosts, power_log, period_s=settings.timings.guard_period_s,
                                         budget_s=settings.timings.guard_budget_s)
    hosts_side = HostsSideWitness(settings.timings.guard_period_s, settings.timings.guard_budget_s)
    return FleetLiveness(settings.watchdog.fleet_window_s, guard, hold_s=settings.watchdog.correlated_hold_s,
                         segments=segments_of(hosts, resolve), clock=clock.monotonic,
                         host_witnesses={h.name: named_witnesses(h) for h in hosts}, hosts_side=hosts_side.peek)


def unjudged_cells(book: Playbook, records: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """Cells with no judged attempt on any host. A search's or bisection's level that the ladder
    never chose has no record by design (a clean run above it spoke for it, or the change point
    was decided without it): only a level that ran and was all infra counts. ``records``:
    typed, or their JSON lines."""
    attempts = attempts_of(records)
    judged = {r.cell for r in attempts if r.outcome != Outcome.INFRA.value}
    ran = {r.cell for r in attempts}
    return tuple(c.name for c in book.cells
                 if c.name not in judged and (book.ladder is None or c.name in ran))


def run_campaign(
    plan: CampaignPlan,
    settings: RunSettings,
    report_root: Path,
    *,
    progress: Callable[..., None] = lambda host, **fields: None,
    stop: threading.Event | None = None,
    recovery_factory: Callable[[CampaignDir], PowerControl] | None = None,
    port_for: Callable[[CampaignContext, Host], HostPort] | None = None,
    clock: Clock | None = None,
    network_ok: Callable[[], bool] | None = None,
    observers: Sequence[Observer] = (),
    ladder_for: Callable[[LadderPlan], Ladder] | None = None,
    slurm_client: SlurmClient | None = None,
    slurm_terms: SlurmTerms | None = None,
) -> CampaignResult:
    """Run every host's plan in parallel and return the records this run appended.

    ``port_for``, ``clock`` and ``network_ok`` are the seam a test plays a campaign through
    (fake hosts, virtual time, a partition guard it scripts); by default the hosts are reached
    over SSH, time is the system's, and the guard asks carrier, witnesses and power devices.
    ``observers`` (notifications) are told every event and record as it is written, beside
    the metrics.prom writer every campaign has. ``ladder_for``: a search's model (default: the
    real one, ``LadderPlan.ladder``), the seam a test scripts a search through. ``slurm_client``:
    how Slurm is asked when hosts are Slurm nodes (default: its commands on this controller);
    ``slurm_terms``: how long and how often a node's jobs are waited for (default: up to the
    playbook's ``timeouts.slurm_jobs``).
    """
    # The playbook's connect timeout governs every connection of this campaign.
    settings = replace(settings, transport=replace(settings.transport,
                                                   connect_timeout=plan.playbook.timeouts.connect))
    poc_path = Path(plan.playbook.poc.script)
    try:
        poc_script = poc_path.read_bytes()
    except OSError as exc:
        raise ReprofleetError(f"{plan.playbook.path}: cannot read the PoC {poc_path}: {exc}") from exc
    # A node cycled through Slurm on a cluster that cannot reboot a locked node: refused before anything runs.
    problems = slurm_power_problems(plan.hosts, slurm_client or SlurmClient())
    if problems:
        raise PowerPreflightError(problems)
    # Read before any folder exists (an unset variable stops nothing half-made); names only from here on.
    env_secrets = resolve_env_secrets(plan.playbook.env_secrets)
    secret_digests = {name: secret_digest(name, value) for name, value in env_secrets.items()} \
        if plan.playbook.env_secrets_identity else {}
    directory = CampaignDir(campaign_folder(report_root, plan)).create()
    with CampaignLock(directory.root), watching(Watched(plan.campaign_id, directory, plan.playbook, plan.hosts),
                                                (CampaignMetrics(), *observers)) as watch:  # one controller per folder
        poc_digest = hashlib.sha256(poc_script).hexdigest()
        write_manifest(directory, plan, settings.controller, poc_digest, secret_digests)
        for change in plan.changes:  # before the history is read: it forgets the stops of renewed cells
            watch.events.append({"t": iso_utc((clock or SystemClock()).wall()), "host": "",
                                 "event": CampaignEvent.RESUME_CHANGED.value,
                                 **change.to_json(), "message": change.line()})
        stop = stop or threading.Event()
        clock = clock or SystemClock()
        # what the folder holds (a resume): attempts and events, read once; a record of a cell's
        # earlier identity (a resume that changed it) counts for nothing of the plan
        history = read_history(directory).keeping(belongs_to(plan.playbook, poc_digest))
        recorded = frozenset(history.recorded_ids())
        before = len(recorded)
        earlier = history.earlier()
        fleet = fleet_liveness(plan.hosts, settings, PowerLog(directory.power), clock, network_ok)
        disk = CampaignDiskBudget.of_folders(settings.disk.campaign_bytes,
                                             (directory.streams, directory.root / "netconsole"))
        power = recovery_factory(directory) if recovery_factory is not None else None
        ctx = CampaignContext(
            campaign_id=plan.campaign_id, directory=directory, playbook=plan.playbook, settings=settings,
            bundle=load_bundle(), poc_script=poc_script, attempt_log=watch.attempt_log, events=watch.events,
            fleet=fleet, stop=stop, progress=progress, clock=clock, power=power,
            cache_seed=poc.cache_seed_archive(plan.playbook.poc.cache_source)
            if plan.playbook.poc.cache_source and cache_sync.modes(plan.playbook) - {"seeded"} else None,
            cache_snapshot=cache_sync.seeded_snapshot(plan.playbook),
            started_slots=MappingProxyType(dict(history.started_slots(plan.playbook))),
            started_on=MappingProxyType(dict(history.started_on())), seen_alive=frozenset(history.seen_alive),
            ledger=CampaignLedger(recorded), host_outlets=MappingProxyType(outlet_keys(plan.hosts)),
            # before the runners: each host's netconsole holds it
            netconsole=netconsole_setup.start_receiver(plan.hosts, directory.root / "netconsole", settings.disk, disk),
            disk_budget=disk,
            env_secrets=env_secrets, secret_digests=secret_digests,
            slurm=_slurm(plan, slurm_client, slurm_terms or SlurmTerms(job_wait_s=plan.playbook.timeouts.slurm_jobs)),
        )
        if power is not None:
            announce_power_control(fleet, ctx.event)
        for log in (ctx.attempt_log, ctx.events):
            if log.torn:
                ctx.event("", CampaignEvent.TORN_LINE_CUT, file=log.path.name, text=log.torn[:500],
                          message="the last line was torn by a controller that died mid-write; cut back on open")
        schedule = _schedule(ctx, plan, ladder_for, history)
        runners = [HostRunner(ctx, host, list(plan.per_host[host.name]), earlier=earlier.get(host.name, []),
                              stopped=history.stopped_on(host.name),
                              port=port_for(ctx, host) if port_for is not None else None,
                              resolved_before=history.resolved_on(host.name), schedule=schedule)
                   for host in plan.hosts]
        started = str(iso_utc(clock.wall()))  # this controller's own power actions are those logged from now on
        threads = [threading.Thread(target=r.run, name=f"host-{r.host.name}", daemon=True) for r in runners]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)
        except KeyboardInterrupt:  # the second Ctrl-C: no host is left switched off on the way out
            ports = {r.host.name: r.link.port for r in runners}
            said = switch_on_left_off(lambda name, log: ports[name].power(log), directory.power, started, clock)
            if said is not None:
                ctx.event("", CampaignEvent.POWER_ON_AT_EXIT, message=said)
                raise KeyboardInterrupt(f"stopped by a second Ctrl-C; {said}") from None
            raise
        finally:
            if ctx.netconsole is not None:
                ctx.netconsole.close()
        if ctx.slurm is not None:  # every host thread has ended: no attempt of ours runs on a node given back
            ctx.slurm.give_back(ctx.event)
        records = read_attempts(directory.attempts)
        result = CampaignResult(plan.campaign_id, directory, records[before:], stop.is_set(), ctx.failure,
                                quarantined={r.host.name: str(r.state.quarantined) for r in runners if r.state.quarantined},
                                unjudged=unjudged_cells(plan.playbook, records),
                                given_back={r.host.name: r.state.given_back for r in runners})
        watch.ended = Ended(result.interrupted, result.failure, result.quarantined)
    return result


def campaign_folder(report_root: Path, plan: CampaignPlan) -> Path:
    """Where a plan's records go: ``<reports>/<campaign>``, a shard's in its own sub-folder
    (``<reports>/<campaign>/shard-<i>``), which ``invoke report <reports>/<campaign>`` pools."""
    folder = report_root / plan.campaign_id
    return folder / plan.shard.folder_name if plan.shard is not None else folder


def _slurm_wait_lines(plan: CampaignPlan) -> list[str]:
    """Slurm nodes wait for their running jobs before their first attempt: a wait the bound below leaves out."""
    nodes = [host.name for host in plan.hosts if SLURM_VARIABLE in host.vars]
    if not nodes:
        return []
    return [f"Slurm nodes ({len(nodes)}): each waits up to {plan.playbook.timeouts.slurm_jobs:g} s "
            "(timeouts.slurm_jobs) for the jobs running on it before its first attempt, then is refused; "
            "not counted in the duration below"]


def _slurm(plan: CampaignPlan, client: SlurmClient | None, terms: SlurmTerms) -> SlurmNodes | None:
    """The campaign's scheduler when any host is a Slurm node (``-i slurm:...``). A shard's
    reasons carry its shard (``reprofleet:<campaign>/shard-<i>``): a shard that ends gives back
    its own nodes, never those of a shard still running."""
    if not any(SLURM_VARIABLE in host.vars for host in plan.hosts):
        return None
    name = f"{plan.campaign_id}/{plan.shard.folder_name}" if plan.shard is not None else plan.campaign_id
    return SlurmNodes(client or SlurmClient(), name, terms)


def _schedule(ctx: CampaignContext, plan: CampaignPlan, ladder_for: Callable[[LadderPlan], Ladder] | None,
              history: CampaignHistory) -> LadderSchedule | None:
    """A search's shared ladder, fed this folder's records so far (a resume continues from them)."""
    book = plan.playbook
    if book.ladder is None:
        return None
    ladder_plan_ = ladder_plan(book.ladder, plan.hosts, book.seed)
    ladder = (ladder_for or LadderPlan.ladder)(ladder_plan_)
    return LadderSchedule(book, ladder_plan_, ladder, [h.name for h in plan.hosts], list(history.records), ctx.event,
                          ctx.stop, told=history.search_done_probes)


def default_controller_name() -> str:
    return socket.gethostname()
