"""One host's share of a campaign: prepare it, run its attempts in plan order, recover it.

Everything that goes wrong on one host is data (an ``infra`` record, a quarantine), never
an exception that reaches the other hosts.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import traceback
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Iterator, Mapping

from reprofleet.runner import cache_sync, host_debug, netconsole as netconsole_setup, poc, gpu_policy as policy, readiness, runtimes as runtime_truth
from reprofleet.records import identity
from reprofleet.remote.agent import AgentClient, StreamEvent
from reprofleet.remote.replies import AttemptListing
from reprofleet.runner.attempt import AttemptEnd, AttemptFollower
from reprofleet.runner.context import CampaignContext, RunSettings, cell_identity, identity_factors, record_runtime
from reprofleet.errors import (AgentError, AgentFenced, ConnectError, ControllerDiskError, HostKeyError, HostNotReady, LeaseError, PolicyError,
                     ReprofleetError)
from reprofleet.runner.port import HostPort, SshHostPort
from reprofleet.runner.stops import HostStops
from reprofleet.model import Cell, EventKind, GpuPolicy, Host, Outcome, Record
from reprofleet.power.wall import WallPowerSampler, freeze_telemetry
from reprofleet.records.facts_cache import cache_facts
from reprofleet.records.store import StreamWriter, iso_utc, power_cycles_logged, utc_now, write_facts
from reprofleet.liveness.probes import ProbeAnswer
from reprofleet.remote.transport import Session
from reprofleet.liveness.watchdog import Verdict, Watchdog
from reprofleet.model.events import CampaignEvent
from reprofleet.model.reasons import ReasonCode, reason_code, slot_runs_again
from reprofleet.runner.host_log import HostLog
from reprofleet.runner.search import LadderSchedule

CONTROLLER_DISK_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)  # the controller cannot write: stop all

__all__ = ["CampaignContext", "HostRunner", "HostState", "RunSettings", "cell_identity", "record_runtime"]


@dataclass
class HostState:
    """What the runner knows of its host right now."""

    session: Session | None = None
    agent: AgentClient | None = None
    home: str = ""
    boot_id: str | None = None
    attempts_in_boot: int = 0
    uptime_at_boot_check: float | None = None
    applied: policy.PolicyState | None = None
    last_requested: GpuPolicy | None = None  # the policy the last attempt asked for (recovery re-applies it)
    observed: Mapping[str, Any] | None = None  # an observe-only host: the card's last read-back (never set)
    facts_hash: str | None = None
    poc_path: str = ""
    quarantined: str | None = None
    cache_seed: str | None = None  # path of the uploaded starting cache on the host
    cache_manifest: str | None = None
    cache_snapshot: str | None = None  # the snapshot the current attempt's cache was built from (seeded)
    power_cycles: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    leased: bool = False
    prepared: bool = False  # this run reached the host and prepared it (so it restores it at the end)
    wall: WallPowerSampler | None = None  # the current attempt's wall-power sampler


class HostRunner:
    def __init__(self, ctx: CampaignContext, host: Host, plan: list[tuple[Cell, int]],
                 earlier: Iterable[Mapping[str, Any]] = (), stopped: Iterable[str] = (),
                 port: HostPort | None = None, resolved_before: Iterable[Mapping[str, Any]] = (),
                 schedule: LadderSchedule | None = None) -> None:
        """``earlier``: this host's records from attempts.jsonl; ``stopped``: its cells that
        already have a ``stopped`` event (a resumed campaign rebuilds its stop state from them);
        ``resolved_before``: its ``runtime_resolved`` events of earlier controllers;
        ``port``: how it reaches its host (SSH, probes, power drivers unless a test fakes the host);
        ``schedule``: a search's or bisection's shared ladder, which picks each next slot at run
        time (``plan`` then only lists the cells the host must be prepared for)."""
        self.ctx = ctx
        self.host = host
        self.plan = plan
        self.state = HostState()
        earlier = list(earlier)
        self.stops = HostStops(ctx.playbook, earlier, stopped)
        self.log = HostLog(host.name, ctx.event, lambda name, **fields: ctx.progress(name, **fields))
        self.runtimes = runtime_truth.HostRuntimes(self.log, earlier, resolved_before)  # image digests, interpreter and package versions
        self.sysctls = host_debug.HostDebugSysctls(self.log, ctx.playbook)  # lockup-to-panic sysctls of this boot
        self.netconsole = netconsole_setup.HostNetconsole(self.log, host.netconsole, ctx.netconsole)
        self.port: HostPort = port or SshHostPort(ctx, host)
        self.refused = False  # the last start was refused by the agent (another attempt alive)
        self.failed_attempt: str | None = None  # an attempt a bug or a full disk interrupted
        self.streak: list[str] = []  # the shapes of the last infra reasons in a row
        self.fenced: str | None = None  # another controller took the lease: this runner must not act again
        self.schedule = schedule
        self.may_run = {cell.name for cell, _ in plan}  # a ladder's cells this host may run (observe-only: no settings)

    # -- connection ------------------------------------------------------------------
    def connect(self) -> AgentClient:
        """A fresh session and agent client (the old session, if any, is dropped)."""
        if self.state.session is not None:
            self.state.session.close()
            self.state.session, self.state.agent = None, None
        agent = self.port.connect()
        self.ctx.fleet.heard(self.host.name, self.ctx.clock.monotonic())  # it answers: no longer silent
        agent.lease_token = self.ctx.lease_token
        session = agent.session
        self.state.session = session
        self.state.agent = agent
        if not self.state.home:
            self.state.home = session.run('printf %s "$HOME"', timeout=15).stdout.strip()
        return agent

    def agent(self) -> AgentClient:
        if self.state.agent is None or self.state.session is None or not self.state.session.alive:
            return self.connect()
        return self.state.agent

    def probe(self) -> ProbeAnswer:
        """Independent of the attempt's connection: SSHD (a banner), KERNEL (echo or handshake) or DEAD."""
        return self.port.probe(self.ctx.settings.watchdog.probe_timeout_s)

    # -- preparation -----------------------------------------------------------------
    def prepare(self) -> None:
        agent = self.connect()
        self.take_lease(agent)
        self.count_power_cycles()
        self.reconcile_orphans(agent)
        facts = agent.facts()
        self.state.facts_hash = write_facts(self.ctx.directory, self.host.name, dict(facts.as_json))
        cache_facts(self.ctx.directory.root.parent, self.host.name, dict(facts.as_json))
        self._note_boot(str(facts.boot_id), float(facts.uptime_s))
        missing = readiness.problems(self.host, [cell for cell, _ in self.plan], facts.as_json)
        if missing:
            raise HostNotReady(self.host.name, missing)
        problems = policy.check_power_limits(self.ctx.playbook, self.host, facts.as_json)
        if problems:
            raise PolicyError("; ".join(problems))
        name = self.ctx.playbook.poc.script.rsplit("/", 1)[-1]
        poc_digest = self.ctx.poc_digest[:12]  # a new PoC gets a new folder
        rel = agent.push_file(self.ctx.poc_script, f"poc/{poc_digest}", name)
        self.state.poc_path = f"{self.state.home}/{rel}"
        self.runtimes.prepare(agent, [cell for cell, _ in self.plan], self.host.python)
        if self.ctx.cache_seed is not None:
            archive, seed_digest = self.ctx.cache_seed
            seed_rel = agent.push_file(archive, "cache-seed", f"{seed_digest}.tar.gz")
            self.state.cache_seed = f"{self.state.home}/{seed_rel}"
        cache_sync.push_for_campaign(self.ctx, agent)  # seeded cells: the snapshot, content-addressed
        self.ctx.event(self.host.name, CampaignEvent.PREPARED, agent=self.ctx.bundle.digest, poc=poc_digest,
                       boot_id=self.state.boot_id)
        self.state.prepared = True

    def prepare_or_bring_back(self) -> None:
        """A host that does not answer at the start (left off or frozen by a controller that
        died mid-recovery) is brought back through the normal recovery path, then prepared."""
        try:
            self.prepare()
            return
        except (LeaseError, HostKeyError):
            raise
        except ConnectError as exc:
            answer = self.probe()
            if answer is ProbeAnswer.KERNEL and self._sshd_within_boot_deadline():
                self.prepare()  # it was booting (a kill -9 during its recovery): a host like any other
                return
            if self.ctx.recovery is None or not self.host.pdu or self.ctx.stop.is_set() \
                    or answer is ProbeAnswer.SSHD:
                raise
            userspace = answer is ProbeAnswer.KERNEL
            self.ctx.fleet.silent(self.host.name, self.ctx.clock.monotonic())  # hosts silent with it hold its cycle
            self.ctx.event(self.host.name, CampaignEvent.UNREACHABLE_AT_START, reason=str(exc), kernel_answers=userspace,
                           message="switching it on / power-cycling it through its port")
        self._drop_session()
        if not self.switch_on_if_off():
            self._recover_at_start(userspace)
            if self.state.quarantined:
                raise ConnectError(self.host.name, self.state.quarantined)
        self.prepare()

    def _sshd_within_boot_deadline(self) -> bool:
        """A host whose kernel answers but whose sshd does not may be booting: wait for it up to
        the boot deadline (then it is a userspace wedge)."""
        deadline = self.ctx.clock.monotonic() + self.ctx.playbook.timeouts.boot
        while self.ctx.clock.monotonic() < deadline and not self.ctx.stop.is_set():
            if self.probe() is ProbeAnswer.SSHD:
                return True
            self.ctx.clock.wait(self.ctx.stop, self.ctx.settings.timings.switched_on_poll_s)
        return False

    def _recover_at_start(self, userspace: bool) -> None:
        """Frozen with its power on at the start. When this campaign started an attempt on it
        that has no record, that attempt is the reproduction: it is recorded as a wedge
        "declared on resume" and recovery amends that record with what it finds. Otherwise
        (a controller that died mid-recovery, after the wedge was recorded) a placeholder
        carries the recovery."""
        pending = self.unrecorded()
        if not pending and not self.seen_alive():
            raise ConnectError(self.host.name, self._never_answered())
        if not pending:
            placeholder = self._infra(self.ctx.playbook.cells[0], -1, ReasonCode.UNREACHABLE_AT_START.words())
            self.ctx.recovery.recover(self, placeholder)  # the wedge path; its record exists already
            return
        attempt_id, cell, index = pending[-1]
        why = ("userspace: the kernel answers but sshd never came back" if userspace
               else "the host stopped answering")
        declared = replace(self._infra(cell, index, "", attempt_id=attempt_id), outcome=Outcome.WEDGE,
                           reason=f"declared on resume: {why} while the controller was away")
        self.append(declared)
        self.ctx.recorded_ids.add(attempt_id)
        self.ctx.event(self.host.name, CampaignEvent.WEDGE, attempt=attempt_id, found_on_resume=True)
        after = self.ctx.recovery.recover(self, declared)
        self.amend(declared, after)
        self._count(after)
        self._drop_from_plan(cell, index)

    def _never_answered(self, detail: str = "") -> str:
        return (f"never answered at {self.host.address}:{self.host.port} in this campaign"
                + (f" ({detail})" if detail else "") + ": not switched (a mistyped address would switch someone "
                f"else's machine); check the address, or `invoke power {self.host.name} on`, or pass --bring-up")

    def seen_alive(self) -> bool:
        """Whether this campaign has seen the host answer (it prepared it, or recorded an
        attempt of it), or the user said --bring-up: only then may it cut the host's power."""
        return self.ctx.settings.bring_up or self.host.name in self.ctx.seen_alive

    def unrecorded(self) -> list[tuple[str, Cell, int]]:
        """This campaign's attempts started on this host that have no record, oldest first."""
        return [(attempt_id, *self.ctx.started_slots[attempt_id]) for attempt_id, host in self.ctx.started_on.items()
                if host == self.host.name and attempt_id in self.ctx.started_slots
                and not self.ctx.recorded(attempt_id)]

    def _drop_from_plan(self, cell: Cell, index: int) -> None:
        self.plan = [(c, i) for c, i in self.plan if not (c.name == cell.name and i == index)]

    def record_what_ran_while_away(self) -> None:
        """Every attempt this campaign started here without a record (the controller died
        under it) is recorded from the host's own files: followed from its first line if it
        still runs, read whole if it exited, a reboot "declared on resume" if the host reset
        under it; one the host never saw is ``infra: interrupted`` and runs again."""
        pending = self.unrecorded()
        if not pending or self.state.quarantined:
            return
        known = {a.id: a for a in self.agent().attempts()}
        for attempt_id, cell, index in pending:
            listed = known.get(attempt_id)
            if listed is None:
                record = self._infra(cell, index, ReasonCode.INTERRUPTED.words(
                    "the controller died before the attempt reached the host"), attempt_id=attempt_id)
                self.append(record)
                self.ctx.recorded_ids.add(attempt_id)
                continue
            self.ctx.event(self.host.name, CampaignEvent.ATTEMPT_RESUMED, attempt=attempt_id, status=listed.status)
            resumed = self.run_slot(cell, index, resume=listed)
            if resumed is not None and not slot_runs_again(resumed.outcome.value, resumed.reason):
                self._drop_from_plan(cell, index)

    def switch_on_if_off(self) -> bool:
        """An outlet that reads off explains the silence for certain (a controller died mid-cycle):
        it is switched on, with no partition guard to consult, and the boot awaited. False when
        every outlet reads on (the host is frozen, not off)."""
        from reprofleet.power.base import PowerState
        from reprofleet.power.ports import switch_on_until

        power = self.port.power(self.ctx.recovery.power_log)
        off = [driver for driver in power.drivers if driver.status() is PowerState.OFF]
        if not off:
            return False
        if not self.seen_alive() and not power_cycles_logged(self.ctx.directory.power, self.host.name):
            raise ConnectError(self.host.name, self._never_answered(f"its outlet {off[0].outlet_key} reads off"))
        # every supply on (the ones that read on stay as they are), each retried on its own
        switch_on_until(power, self.ctx.settings.timings.power_on_deadline_s, self.ctx.clock)
        self.ctx.event(self.host.name, CampaignEvent.SWITCHED_ON_AT_START, outlets=[d.outlet_key for d in off])
        deadline = self.ctx.clock.monotonic() + self.ctx.playbook.timeouts.boot
        while self.ctx.clock.monotonic() < deadline and not self.ctx.stop.is_set():
            if self.probe() is ProbeAnswer.SSHD:
                return True
            self.ctx.clock.wait(self.ctx.stop, self.ctx.settings.timings.switched_on_poll_s)
        raise ConnectError(self.host.name, f"switched on at campaign start, but did not answer within "
                                           f"{self.ctx.playbook.timeouts.boot:g} s")

    def take_lease(self, agent: AgentClient) -> None:
        """No two controllers run attempts on one host: take its lease, or refuse the host.

        A live lease under another token is refused, the same campaign's too (a second
        controller resumed while the first still runs), unless ``--break-lease``; one left by
        this campaign's own controller on this machine whose process is gone (a kill -9, a
        crash) is taken over at once, and the event says why.
        """
        def acquire(break_lease: bool) -> Any:
            return agent.lease("acquire", controller=self.ctx.settings.controller, campaign=self.ctx.campaign_id,
                               pid=os.getpid(), break_lease=break_lease, ttl_s=self.ctx.lease_ttl_s)

        answer = acquire(self.ctx.settings.break_leases)
        why = "--break-lease"
        if not answer.ok and self._left_by_a_dead_controller_here(answer.held):
            answer, why = acquire(True), "its controller process on this machine is gone"
        if not answer.ok:
            raise LeaseError(self.host.name, answer.error or "the host's lease was refused")
        if answer.broken:
            self.ctx.event(self.host.name, CampaignEvent.LEASE_BROKEN, previous=dict(answer.broken),
                           why="it had expired" if answer.broken.get("expired") else why)
        self.state.leased = True

    def _left_by_a_dead_controller_here(self, held: Mapping[str, Any] | None) -> bool:
        if not held or held.get("campaign") != self.ctx.campaign_id \
                or held.get("controller") != self.ctx.settings.controller:
            return False
        try:
            pid = int(held.get("pid") or 0)
        except (TypeError, ValueError):
            return False
        if pid <= 0 or pid == os.getpid():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False  # alive, someone else's
        return False

    def release_lease(self) -> None:
        if not self.state.leased or self.state.agent is None or self.fenced:
            return
        try:
            self.state.agent.lease("release", campaign=self.ctx.campaign_id)
            self.state.leased = False
        except ReprofleetError as exc:
            self.ctx.event(self.host.name, CampaignEvent.LEASE_RELEASE_FAILED, error=str(exc))

    def count_power_cycles(self) -> None:
        """The budget survives a controller restart: cycles this campaign already made, from power.jsonl."""
        self.state.power_cycles = max(self.state.power_cycles, power_cycles_logged(self.ctx.directory.power,
                                                                                  self.host.name))

    def reconcile_orphans(self, agent: AgentClient) -> None:
        """An attempt still running on the host (a controller died under it) is killed and
        recorded as ``infra`` with the reason, or, if it is not this campaign's, only killed;
        never is a second PoC started beside it."""
        for orphan in agent.attempts(running_only=True):
            slot = self.ctx.started_slots.get(orphan.id)
            if slot is not None and not self.ctx.recorded(orphan.id) \
                    and self.ctx.started_on.get(orphan.id) == self.host.name:
                continue  # this campaign's, still running: followed from its first line and recorded
            reply = agent.kill(orphan.id)
            self.ctx.event(self.host.name, CampaignEvent.ORPHAN_KILLED, attempt=orphan.id, age_s=orphan.age_s,
                           ours=slot is not None, **reply.container_fields())
            if slot is not None and not self.ctx.recorded(orphan.id):
                cell, index = slot
                self.append(self._infra(cell, index, ReasonCode.INTERRUPTED.words("the controller died during this attempt; "
                                                     "its orphan was killed on resume"), attempt_id=orphan.id))

    def _note_boot(self, boot_id: str, uptime_s: float) -> None:
        if boot_id != self.state.boot_id:
            self.state.boot_id = boot_id
            self.state.attempts_in_boot = 0
            self.state.applied = None  # the driver forgot -lgc/-pl: re-apply
            self.sysctls.forget()  # and the kernel its sysctls
            self.state.uptime_at_boot_check = uptime_s

    def current_boot(self, agent: AgentClient) -> str:
        out = agent.session.run("cat /proc/sys/kernel/random/boot_id; cut -d' ' -f1 /proc/uptime", timeout=15)
        lines = out.stdout.split()
        try:
            uptime_s = float(lines[1]) if len(lines) >= 2 else math.nan
        except ValueError:
            uptime_s = math.nan
        if not math.isfinite(uptime_s):
            raise ConnectError(self.host.name, f"cannot read boot_id and uptime: {out.stdout[:120]!r}")
        self._note_boot(lines[0], uptime_s)
        return lines[0]

    # -- policy ----------------------------------------------------------------------
    def ensure_policy(self, agent: AgentClient, wanted: GpuPolicy) -> Mapping[str, Any]:
        """The cell's policy in force, and what the GPU reports right now (one read per attempt)."""
        if self.host.observe_only:
            return self._observe_policy(agent, wanted)
        if self.state.applied is not None and self.state.applied.requested == wanted:
            now = policy.read(agent, self.host.gpu_index)
            changes = policy.changed_since(self.state.applied.readback, now)
            if not changes:
                return now
            self.ctx.event(self.host.name, CampaignEvent.POLICY_CHANGED, policy=wanted.as_dict(), changes=changes,
                           message="the card no longer reads what was applied (changed by hand or by another "
                                   "tool?): re-applied before the attempt")
        # A boot not yet verified is applied and read back whatever the cell asks, the
        # default cell included: a lock left by a killed controller must not run the reference.
        self.state.last_requested = wanted
        state = policy.apply(agent, self.host, wanted)  # its read-back is fresh
        self.ctx.event(self.host.name, CampaignEvent.POLICY_APPLIED, policy=wanted.as_dict(), readback=dict(state.readback))
        self.state.applied = state
        return state.readback

    def _observe_policy(self, agent: AgentClient, wanted: GpuPolicy) -> Mapping[str, Any]:
        """An observe-only host: the card is read, never set. A cell that asks for a setting
        was refused before the campaign started; one that reaches here all the same (a plan
        built by other code) is infra, never run under settings it did not ask for."""
        if not wanted.is_default:
            raise PolicyError(f"{self.host.name}: the host is observe-only (gpu_policy: observe) and the cell asks "
                              f"{wanted.as_dict()}: not run")
        now = policy.read(agent, self.host.gpu_index)
        changes = policy.changed_since(self.state.observed, now) if self.state.observed is not None else []
        if changes:
            self.ctx.event(self.host.name, CampaignEvent.POLICY_CHANGED, policy={}, changes=changes,
                           message="observe-only host: the card's settings changed between attempts (by its owner?); "
                                   "left as they are, the record carries the new read-back")
        self.state.observed = now
        return now

    def reapply_after_recovery(self) -> str | None:
        """After a recovery the new boot has lost the card's settings: the last attempt's policy
        is applied and read back now, so a card that refuses it is quarantined with its words at
        once, not after ``infra_streak`` attempts. Returns why it failed, or None."""
        wanted = self.state.last_requested
        if wanted is None:
            return None
        try:
            self.ensure_policy(self.agent(), wanted)
        except ReprofleetError as exc:
            return f"the GPU policy could not be re-applied after recovery: {exc}"
        return None

    def may_restore(self) -> bool:
        """Whether the experiment's settings can be put back at the end: always on a host that
        ran its plan; on a quarantined one only when its sshd answers a short probe (a host that
        never came back is not waited for). A quarantined host that still answers must not keep
        locked clocks, lockup panics, printk 8 and netconsole aimed at this controller: a
        production box that later hits a soft lockup would panic and reboot."""
        if self.fenced:
            return False  # the GPU is the other controller's now
        if not self.state.quarantined:
            return True
        if not (self.state.prepared or self.state.applied is not None or self.sysctls.applied is not None):
            return False  # nothing of ours is on it (refused before the first change)
        return self.port.probe(self.ctx.settings.timings.banner_timeout_s) is ProbeAnswer.SSHD

    def restore_policy(self, give_back: bool = True) -> None:
        """Defaults back at the end. A host this run prepared is restored even when this run
        applied nothing: a resume with no slot left on it must still undo the lock a killed
        controller left between its last record and its own restore."""
        if not give_back or self.host.observe_only or (self.state.applied is None and not self.state.prepared):
            return  # an observe-only host's card was never set: nothing to put back
        try:
            readback = policy.restore(self.agent(), self.host)
            self.ctx.event(self.host.name, CampaignEvent.POLICY_RESTORED, readback=dict(readback))
            self.state.applied = None
        except ReprofleetError as exc:
            self.ctx.event(self.host.name, CampaignEvent.POLICY_RESTORE_FAILED, error=str(exc))

    # -- one attempt -----------------------------------------------------------------
    def run_attempt(self, cell: Cell, index: int, resume: AttemptListing | None = None) -> Record:
        """One attempt of ``cell``: started now, or (``resume``) one a dead controller started,
        followed from its first line without touching the GPU's settings under it."""
        attempt_id = resume.id if resume is not None else str(uuid.uuid4())
        started = utc_now()
        stream_rel = f"streams/{attempt_id}.jsonl"
        readback: Mapping[str, Any] | None = None
        follower: AttemptFollower | None = None
        debug: dict[str, Any] | None = None
        try:
            agent = self.agent()
            self.current_boot(agent)
            if resume is not None:
                readback = policy.read(agent, self.host.gpu_index) if resume.status == "running" else None
                follower = self._follow_existing(agent, attempt_id)
            else:
                readback = self.ensure_policy(agent, cell.gpu)
                debug = self.sysctls.ensure(agent, cell.host_debug)
                self.netconsole.ensure(agent, self.state.boot_id)
                self.ctx.event(self.host.name, CampaignEvent.ATTEMPT_STARTED, attempt=attempt_id, cell=cell.name,
                               index=index)
                follower = self._start(agent, cell, attempt_id)
            self.ctx.progress(self.host.name, cell=cell.name, attempt=index + 1, phase="starting")
            end = follower.follow()
        except AgentFenced as exc:
            self.fenced = str(exc)
            end = AttemptEnd(Outcome.INFRA, ReasonCode.NOT_RUN.words(f"fenced: {exc}"), None)
        except ReprofleetError as exc:
            end = AttemptEnd(Outcome.INFRA, str(exc), None)
        except BaseException as exc:  # a bug, a full disk: the attempt must not run on unwatched
            if follower is not None:
                self.failed_attempt = attempt_id  # its infra record keeps the id that ran
                self.stop_attempt(attempt_id, f"{type(exc).__name__}: {exc}")
            raise
        finally:
            if self.state.wall is not None:
                self.state.wall.stop()
            self.netconsole.unfollow()
        self.refused = follower is not None and follower.refused
        if follower is not None and follower.fenced:
            self.fenced = follower.fenced
        if follower is not None and not follower.refused and not follower.killed and end.exit is None \
                and end.outcome is Outcome.INFRA:  # it ended without the PoC's own exit: stop what may still run
            self.stop_attempt(attempt_id, end.reason or "the attempt ended without its exit line")
        if self.refused:
            self.ctx.event(self.host.name, CampaignEvent.START_REFUSED, attempt=attempt_id, cell=cell.name,
                           index=index, reason=end.reason)
        else:
            self.state.attempts_in_boot += 1
        return replace(self._record(cell, index, attempt_id, started, end, readback, follower, stream_rel),
                       host_debug=debug, kernel_net=self.netconsole.record_lines(end.outcome))

    def _start(self, agent: AgentClient, cell: Cell, attempt_id: str) -> AttemptFollower:
        state_root = f"{self.state.home}/.cache/reprofleet"
        command = poc.build(cell, poc_path=self.state.poc_path, state_root=state_root,
                            attempt_id=attempt_id, persistent=self.ctx.playbook.poc.mode(cell) == "persistent",
                            gpu=self.host.gpu_index, seeded=self.ctx.playbook.poc.mode(cell) == "seeded",
                            secret_names=tuple(self.ctx.env_secrets))
        self.state.cache_snapshot = cache_sync.seed_attempt(self.ctx, agent, cell, command.cache_dir)
        prepared = agent.session.run(
            poc.prepare_cache_command(command.cache_dir,
                                      None if self.state.cache_snapshot else self.state.cache_seed), timeout=120)
        if not prepared.ok:
            raise AgentError(self.host.name, f"cannot prepare the cache {command.cache_dir}: {prepared.stderr.strip()}")
        manifest = agent.session.run(poc.cache_manifest_command(command.cache_dir), timeout=60)
        self.state.cache_manifest = manifest.stdout.strip() or None
        timeout = self.ctx.playbook.timeouts.attempt
        stream = agent.run(attempt_id, list(command.argv), timeout=timeout, env=dict(command.env),
                           secrets=self.ctx.env_secrets,
                           gpu=self.host.gpu_index, sample_hz=self.ctx.settings.sample_hz,
                           clock_threshold=self.ctx.settings.clock_threshold_mhz, container=command.container)
        writer = StreamWriter(self.ctx.directory.stream_path(attempt_id))
        # wall power, where an outlet meters it: a host frozen at 400 W and one at 60 W are different bugs
        self.state.wall = self.port.wall_sampler(lambda line: writer.write(json.dumps(line, sort_keys=True)))
        self.state.wall.start()
        self.netconsole.follow(attempt_id, writer.write)  # the kernel's lines over the network
        watchdog = Watchdog(self.host.name, self.probe, self.ctx.settings.watchdog, self.ctx.fleet,
                            clock=self.ctx.clock.monotonic)
        return AttemptFollower(agent, attempt_id, stream, writer, watchdog, timeout_s=timeout,
                               reconnect=self.connect, on_event=self._on_event, on_pause=self._on_pause,
                               stop=self.ctx.stop, clock=self.ctx.clock, timings=self.ctx.settings.timings)

    def _follow_existing(self, agent: AgentClient, attempt_id: str) -> AttemptFollower:
        """Re-read a dead controller's attempt from its first line (the stream file starts again)."""
        stream = agent.attach(attempt_id, 0)
        writer = StreamWriter(self.ctx.directory.stream_path(attempt_id), fresh=True)
        self.state.wall = self.port.wall_sampler(lambda line: writer.write(json.dumps(line, sort_keys=True)))
        self.state.wall.start()
        watchdog = Watchdog(self.host.name, self.probe, self.ctx.settings.watchdog, self.ctx.fleet,
                            clock=self.ctx.clock.monotonic)
        return AttemptFollower(agent, attempt_id, stream, writer, watchdog,
                               timeout_s=self.ctx.playbook.timeouts.attempt, reconnect=self.connect,
                               on_event=self._on_event, on_pause=self._on_pause, stop=self.ctx.stop,
                               clock=self.ctx.clock, timings=self.ctx.settings.timings)

    def _on_pause(self, paused: bool, why: Verdict = Verdict.CONTROLLER_NETWORK) -> None:
        held = why is Verdict.HELD
        if paused and held:
            self.ctx.progress(self.host.name, status="held: silent with other hosts (their switch?)")
        elif paused:
            self.ctx.event(self.host.name, CampaignEvent.CONTROLLER_NETWORK_SUSPECT,
                           message="every host went silent at once: suspecting the controller's own network; "
                                   "no power action, waiting for hosts to answer")
            self.ctx.progress(self.host.name, status="paused: controller network?")
        else:
            if not held:
                self.ctx.event(self.host.name, CampaignEvent.CONTROLLER_NETWORK_BACK)
            self.ctx.progress(self.host.name, status="running")

    def _on_event(self, event: StreamEvent) -> None:
        if event.kind is EventKind.PHASE:
            self.ctx.progress(self.host.name, phase=str(event.data.get("phase")))

    def _record(self, cell: Cell, index: int, attempt_id: str, started: str, end: AttemptEnd,
                readback: Mapping[str, Any] | None, follower: AttemptFollower | None, stream_rel: str) -> Record:
        trace = follower.trace if follower else None
        exit_line = end.exit or {}
        runtime = {**record_runtime(cell), **self.runtimes.fields(cell)}
        last_hb = trace.last_heard_wall if trace else None
        return Record(
            campaign=self.ctx.campaign_id, attempt=attempt_id, controller=self.ctx.settings.controller,
            host=self.host.name, cell=cell.name, factors=dict(cell.factors), policy=readback,
            runtime=runtime,
            cache=self.state.cache_manifest if self.ctx.playbook.poc.mode(cell) != "fresh" and follower else None,
            cache_snapshot=self.state.cache_snapshot if follower else None,
            attempt_index=index, attempt_in_boot=self.state.attempts_in_boot,
            cold_boot=self.state.attempts_in_boot == 1 and (self.state.uptime_at_boot_check or 1e9) < 900,
            boot_id=self.state.boot_id, started=started, ended=utc_now(), outcome=end.outcome,
            reason=end.reason, exit_code=exit_line.get("rc"), detect_latency_s=end.detect_latency_s,
            last_heartbeat=iso_utc(last_hb),
            wedge_declared=iso_utc(end.declared_wall),
            last_phase=trace.last_phase if trace else None,
            phases=tuple(phase for _, phase in trace.phases) if trace else None,
            last_log_line=trace.last_log_line if trace else None,
            telemetry=self._telemetry(exit_line, trace, end.outcome),
            forensics=None, facts=self.state.facts_hash,
            stream=stream_rel if follower else None,
            poc=self.ctx.poc_digest, cell_id=identity.cell_id(cell.name, identity_factors(cell, self.ctx.secret_digests),
                                                              runtime, self.ctx.poc_digest),
        )

    def _telemetry(self, exit_line: Mapping[str, Any], trace: Any,
                   outcome: Outcome | None = None) -> dict[str, Any] | None:
        """The host's own summary (it exited), or the last NVML sample it sent (it froze),
        plus the wall power its outlet metered last (a freeze: the last minute of it, or why not)."""
        telemetry = dict(exit_line.get("telemetry") or ({"last_sample": trace.last_nvml} if trace and trace.last_nvml
                                                        else {}))
        wall = self.state.wall
        if wall is not None and wall.meters and wall.last():
            telemetry.update(wall.summary())
        if outcome in (Outcome.WEDGE, Outcome.REBOOT):
            telemetry.update(freeze_telemetry(wall, trace.last_heard_wall if trace else None))
        return telemetry or None

    def _fenced_off(self) -> None:
        """Another controller broke this host's lease (``--break-lease``): its records are the
        other's from now on, so this runner writes none, restores nothing and gives nothing back."""
        self.ctx.event(self.host.name, CampaignEvent.FENCED, reason=self.fenced,
                       message="another controller took this host's lease; this controller stops using it")
        self.state.quarantined = f"fenced: {self.fenced}"

    def stop_attempt(self, attempt_id: str, why: str) -> bool:
        """Best effort: kill an attempt that ended without its PoC's own exit, and say so.

        Every such end (the controller's network down past the cap, a host silent at the
        deadline, recovery finding the host alive, a bug, a full disk) would otherwise leave
        the PoC on the GPU, and the next attempt would be refused or run beside it.
        """
        try:
            reply = self.agent().kill(attempt_id)
        except ReprofleetError as exc:
            self.ctx.event(self.host.name, CampaignEvent.ATTEMPT_KILLED, attempt=attempt_id, why=why, ok=False,
                           error=str(exc))
            return False
        self.ctx.event(self.host.name, CampaignEvent.ATTEMPT_KILLED, attempt=attempt_id, why=why, ok=True,
                       was_running=reply.was_running, **reply.container_fields())
        return True

    # -- the whole plan --------------------------------------------------------------
    def run(self) -> None:
        name = self.host.name
        try:
            self.ctx.progress(name, status="preparing")
            self.prepare_or_bring_back()
            self.record_what_ran_while_away()
        except HostNotReady as exc:
            self.ctx.event(name, CampaignEvent.NOT_READY, problems=list(exc.problems))
            self.quarantine(f"cannot run here: {exc}")
        except ReprofleetError as exc:
            self.quarantine(f"could not prepare the host: {exc}")
        except Exception as exc:  # not one of ours: a bug; this host stops, the campaign goes on
            self.quarantine(f"could not prepare the host: {type(exc).__name__}: {exc}", traceback.format_exc())
        try:
            for cell, index in self._slots():
                if self.ctx.stop.is_set() or self.fenced:
                    break
                if self.stopped_early(cell, index) or self.runtimes.moved(self.agent, self.stops, cell, index,
                                                                          bool(self.state.quarantined)):
                    self.ctx.progress(name, stopped_early=1)  # the plan shrinks: n/n at the end
                    if self.schedule is not None:  # a ladder would offer the same level again: this host is done
                        break
                    continue
                self.run_slot(cell, index)
        except ControllerDiskError as exc:
            self.ctx.fail(str(exc))
        finally:
            if self.schedule is not None:
                self.schedule.leave(name)
            give_back = self.may_restore()
            self.restore_policy(give_back)
            self.sysctls.restore_at_end(self.agent, not give_back, self.state.prepared)
            self.netconsole.restore_at_end(self.agent, not give_back)
            self.release_lease()
            if self.state.session is not None:
                self.state.session.close()
            self.ctx.progress(name, status="quarantined" if self.state.quarantined else "done")

    def _slots(self) -> Iterator[tuple[Cell, int]]:
        """The fixed plan, or a search's slots as its ladder picks them; a quarantined, fenced or
        stopped host asks the ladder nothing more (a fixed plan records its slots as not run)."""
        if self.schedule is None:
            yield from self.plan
            return
        while not (self.ctx.stop.is_set() or self.fenced or self.state.quarantined):
            try:
                slot = self.schedule.next_slot(self.host.name)
            except Exception as exc:  # the model's bug (or a model not installed): this host stops, says why
                self.quarantine(f"the {self.schedule.plan.kind} model failed: {type(exc).__name__}: {exc}",
                                traceback.format_exc())
                return
            if slot is None or slot[0].name not in self.may_run:  # a level this host refuses: it leaves the ladder
                return
            yield slot

    def run_slot(self, cell: Cell, index: int, resume: AttemptListing | None = None) -> Record | None:
        """One slot: its record is written the moment its outcome is known (a wedge at its
        declaration); what recovery learns afterwards is appended as an amendment. Returns
        the slot's record as it stands at the end (None when nothing was recorded)."""
        if self.state.quarantined:
            skipped = self._skipped(cell, index)
            self.append(skipped)
            return skipped
        declared: Record | None = None  # the record once it is on disk
        slot_began = self.ctx.clock.monotonic()
        try:
            self.ctx.progress(self.host.name, status="running", cell=cell.name, attempt=index + 1, phase="")
            record = self.run_attempt(cell, index, resume) if resume is not None else self.run_attempt(cell, index)
            if self.fenced:  # the host is another controller's now: record nothing, touch nothing
                self._fenced_off()
                return None
            if resume is not None and record.outcome in (Outcome.WEDGE, Outcome.REBOOT):
                record = replace(record, reason=f"declared on resume: {record.reason} (while the controller was away)",
                                 boot_id=resume.boot_id or record.boot_id)
            if self.refused:  # nothing ran: say so, clear what holds the GPU, and run the slot once more
                self.append(record)
                self.reconcile_orphans(self.agent())
                record = self.run_attempt(cell, index)
            if record.outcome in (Outcome.WEDGE, Outcome.REBOOT):
                cut = self.ctx.cut_since(self.host.name, slot_began)
                if cut is not None:  # a neighbour's cycle switched our shared outlet: not this host's doing
                    record = replace(record, outcome=Outcome.INFRA, reason=ReasonCode.CUT.words(cut),
                                     detect_latency_s=None)
                self.append(record)
                declared = record
                if cut is not None:
                    after = self.after_cut(record)
                elif record.outcome is Outcome.WEDGE:
                    after = self.after_wedge(record)
                else:
                    after = self.after_reboot(record, found_on_resume=True) if resume else self.after_reboot(record)
                after = self.netconsole.with_late_lines(after)  # a panic's text arrives after the declaration
                self.amend(record, after)
                record = after
            else:
                if record.stream is None and not self.ctx.stop.is_set() and self.stays_silent():
                    record = self.after_unreachable(record)
                self.append(record)
        except ControllerDiskError:
            raise
        except OSError as exc:
            if exc.errno not in CONTROLLER_DISK_ERRORS:  # a socket or a host's problem: that host's
                return self._unexpected(cell, index, declared, exc)
            # the controller's own files (a stream on a full disk): stop everything
            raise ControllerDiskError(f"the controller cannot write: {exc}; the campaign stops "
                                      "(GPUs restored, nothing half-written)") from exc
        except Exception as exc:  # not one of ours (or one nobody caught): a bug; recorded, never silent
            return self._unexpected(cell, index, declared, exc)
        self._count(record)
        return record

    def _unexpected(self, cell: Cell, index: int, declared: Record | None, exc: BaseException) -> Record:
        """A bug or an error nobody caught: the host is quarantined with the traceback, the slot
        is recorded (or its declared record amended), and the other hosts go on."""
        reason = f"{type(exc).__name__}: {exc}"
        self.quarantine(f"unexpected error: {reason}", traceback.format_exc())
        if declared is None:
            declared = self._infra(cell, index, ReasonCode.UNEXPECTED_ERROR.words(reason), attempt_id=self.failed_attempt)
            self.append(declared)
        else:
            self.ctx.attempt_log.amend(declared.attempt, forensics={"recovery": "failed", "error": reason})
        self._count(declared)
        return declared

    def _count(self, record: Record) -> None:
        if self.schedule is not None:
            self.schedule.observe(self.host.name, record)
        self._note_infra_streak(record)
        self.stops.add(record.cell, record.outcome.value, record.last_phase, record.phases, record.reason)
        self.state.counts[record.outcome.value] = self.state.counts.get(record.outcome.value, 0) + 1
        self.ctx.progress(self.host.name, outcome=record.outcome.value, counts=dict(self.state.counts))

    def _note_infra_streak(self, record: Record) -> None:
        """A host that broke mid-campaign (a driver gone, a disk full, docker dead) fails every
        attempt the same way in seconds: after ``infra_streak`` in a row for one reason it is
        quarantined with that reason, its remaining slots ``not run``, instead of burning its plan.
        Slots that run again (interrupted, not run) neither extend nor break the streak."""
        if record.outcome is not Outcome.INFRA:
            self.streak = []
            return
        code = reason_code(record.reason)
        if code.runs_again_on_resume:
            return
        key = _reason_shape(record.reason)
        self.streak = [*self.streak, key] if self.streak and self.streak[-1] == key else [key]
        limit = self.ctx.settings.infra_streak
        if limit > 0 and len(self.streak) >= limit and not self.state.quarantined:
            self.quarantine(f"{len(self.streak)} attempts in a row were infra for the same reason: {record.reason}")

    def quarantine(self, reason: str, trace: str | None = None) -> None:
        self.state.quarantined = reason
        self.ctx.event(self.host.name, CampaignEvent.QUARANTINED, reason=reason, **({"traceback": trace} if trace else {}))

    def append(self, record: Record) -> None:
        """Append and fsync a record; a controller that cannot write stops the whole campaign."""
        try:
            self.ctx.attempt_log.append_record(record)
            self.ctx.recorded_ids.add(record.attempt)
        except OSError as exc:
            raise ControllerDiskError(f"cannot write {self.ctx.directory.attempts}: {exc}; the campaign stops "
                                      "(GPUs restored, nothing half-written)") from exc

    def amend(self, declared: Record, final: Record) -> None:
        """What recovery changed in a record written at declaration."""
        before, after = declared.to_json(), final.to_json()
        changed = {k: v for k, v in after.items() if before.get(k) != v and k not in ("attempt", "schema")}
        if changed:
            try:
                self.ctx.attempt_log.amend(declared.attempt, **changed)
            except OSError as exc:
                raise ControllerDiskError(f"cannot write {self.ctx.directory.attempts}: {exc}") from exc

    def stopped_early(self, cell: Cell, index: int) -> bool:
        """Whether ``cell``'s stop rule ended it on this host: its slots are skipped, never recorded.

        The first time, one ``stopped`` event says why; a cell that stopped before (also in
        the run this one resumes) is skipped silently.
        """
        if self.stops.is_stopped(cell.name):
            return True
        stop = self.stops.check(cell)
        if stop is None:
            return False
        self.ctx.event(self.host.name, CampaignEvent.STOPPED, slot=index, **stop.event_fields())
        self.ctx.progress(self.host.name, cell=cell.name, phase="",
                          status=f"stopped {cell.name}: {stop.verdict or 'no verdict'} ({stop.why})")
        return True

    def _skipped(self, cell: Cell, index: int) -> Record:
        return self._infra(cell, index, ReasonCode.NOT_RUN.words(str(self.state.quarantined)))

    def _infra(self, cell: Cell, index: int, reason: str, attempt_id: str | None = None) -> Record:
        now = utc_now()
        runtime = {**record_runtime(cell), **self.runtimes.fields(cell)}
        return Record(
            campaign=self.ctx.campaign_id, attempt=attempt_id or str(uuid.uuid4()),
            controller=self.ctx.settings.controller, host=self.host.name, cell=cell.name,
            factors=dict(cell.factors), policy=None, runtime=runtime, cache=None,
            attempt_index=index, attempt_in_boot=0, cold_boot=False, boot_id=self.state.boot_id,
            started=now, ended=now, outcome=Outcome.INFRA, reason=reason,
            facts=self.state.facts_hash, poc=self.ctx.poc_digest,
            cell_id=identity.cell_id(cell.name, identity_factors(cell, self.ctx.secret_digests), runtime,
                                     self.ctx.poc_digest),
        )

    def stays_silent(self) -> bool:
        """The attempt could not even start: is the host gone (every probe failing for the window)?"""
        settings = self.ctx.settings.watchdog
        began = self.ctx.clock.monotonic()
        deadline = began + settings.confirm_s
        while self.ctx.clock.monotonic() < deadline:
            if self.probe():
                return False
            self.ctx.clock.wait(self.ctx.stop, settings.probe_interval_s)
        self.ctx.fleet.silent(self.host.name, began)  # other hosts silent with it hold its recovery
        return True

    def _drop_session(self) -> None:
        """The host went away under this session: close it; the next step connects afresh."""
        if self.state.session is not None:
            self.state.session.close()
            self.state.session, self.state.agent = None, None

    def after_unreachable(self, record: Record) -> Record:
        """A host that froze between attempts: recover it like a wedge; the slot stays infra."""
        self.ctx.event(self.host.name, CampaignEvent.UNREACHABLE, attempt=record.attempt, reason=record.reason)
        self._drop_session()
        if self.ctx.recovery is None:
            self.state.quarantined = "unreachable, and no recovery is configured"
            return record
        recovered = self.ctx.recovery.recover(self, record)
        return replace(recovered, outcome=Outcome.INFRA,
                       reason=f"{record.reason} (the host was unreachable before the attempt; recovered)")

    def after_reboot(self, record: Record, found_on_resume: bool = False) -> Record:
        """The host reset itself under the attempt (a re-attach found a new boot): it gets the
        same post-boot forensics as a wedge, through recovery's path for a host that came back
        (or, found on resume with the host long back, the forensics alone)."""
        self.ctx.event(self.host.name, CampaignEvent.REBOOT, attempt=record.attempt, reason=record.reason,
                       **({"found_on_resume": True} if found_on_resume else {}))
        if self.ctx.recovery is None:
            return record
        if found_on_resume:
            return self.ctx.recovery.forensics_after_the_fact(self, record)
        self._drop_session()
        return self.ctx.recovery.recover(self, record)

    def after_cut(self, record: Record) -> Record:
        """Its power went with a neighbour's cycle: bring it back like a host that went silent
        (it comes back by itself when the neighbour's cycle switches the outlet on), and keep the
        record ``infra``: a cut is never a reproduction."""
        self.ctx.event(self.host.name, CampaignEvent.CUT_BY_NEIGHBOUR, attempt=record.attempt, reason=record.reason)
        self._drop_session()
        if self.ctx.recovery is None:
            return record
        back = self.ctx.recovery.recover(self, record)
        return replace(back, outcome=Outcome.INFRA, reason=record.reason, detect_latency_s=None)

    def after_wedge(self, record: Record) -> Record:
        """Bring a wedged host back (power cycle when it has a port) and attach forensics."""
        self.ctx.event(self.host.name, CampaignEvent.WEDGE, attempt=record.attempt, latency_s=record.detect_latency_s,
                       last_phase=record.last_phase, last_log_line=record.last_log_line)
        self._drop_session()
        if self.ctx.recovery is None:
            self.state.quarantined = "wedged, and no recovery is configured"
            return record
        return self.ctx.recovery.recover(self, record)


def _reason_shape(reason: str | None) -> str:
    """A reason without what differs between attempts (ids, numbers, durations): two
    ``cannot prepare the cache /x/fresh-<id>: No space left`` are one reason."""
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<id>", reason or "")
    return re.sub(r"\d+(\.\d+)?", "<n>", text)

