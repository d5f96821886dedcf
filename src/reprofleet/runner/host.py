"""One host's share of a campaign: its plan loop. Prepare the host, run its slots in plan order
(or as a search's ladder picks them), send a silent host to recovery, quarantine it when it
must stop, and give back what it changed at the end.

The jobs live in rooms of their own, each built here with what it uses: the link
(runner/link.py: session, agent, boot, lease), the policy keeper (runner/policy_keeper.py),
the attempt (runner/attempt_run.py), the records (runner/slot_record.py), preparation
(runner/preparation.py) and recovery (runner/recovery.py, which decides and returns; only
this module quarantines, in :meth:`HostRunner.quarantine`, and every quarantine is an event).

Everything that goes wrong on one host is data (an ``infra`` record, a quarantine), never
an exception that reaches the other hosts.
"""

from __future__ import annotations

import errno
import traceback
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Iterator, Mapping, TypeGuard

from reprofleet.errors import ConnectError, ControllerDiskError, HostKeyError, HostNotReady, LeaseError, ReprofleetError
from reprofleet.liveness.probes import ProbeAnswer
from reprofleet.model import Cell, Host, Outcome, Record
from reprofleet.model.events import CampaignEvent
from reprofleet.model.reasons import ReasonCode, reason_code, slot_runs_again
from reprofleet.records.store import read_facts
from reprofleet.remote.replies import AttemptListing
from reprofleet.runner import host_debug, netconsole as netconsole_setup, runtimes as runtime_truth
from reprofleet.runner.attempt_run import AttemptRunner
from reprofleet.runner.context import CampaignContext, RunSettings, cell_identity, record_runtime
from reprofleet.runner.give_back import GiveBack
from reprofleet.runner.host_log import HostLog
from reprofleet.runner.infra_streak import InfraStreak
from reprofleet.runner.link import HostLink, LeaseTerms
from reprofleet.runner.policy_keeper import PolicyKeeper
from reprofleet.runner.port import HostPort, SshHostPort
from reprofleet.runner.preparation import HostPreparation
from reprofleet.runner.recovery import HostRecovery, PowerBudget, Recovered, RecoveryBinding, not_declared
from reprofleet.runner.search import LadderSchedule
from reprofleet.runner.slot_record import SlotRecorder
from reprofleet.runner.slurm_node import host_events
from reprofleet.runner.stops import HostStops

CONTROLLER_DISK_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)  # the controller cannot write: stop all
SHUTDOWN_RERUNS = 2  # a slot orderly reboots stopped is run at most this many more times in a row (an upgrade reboots once)
# how long a host that said it is shutting down may take to stop its units before the boot
# deadline starts counting: systemd's DefaultTimeoutStopSec (systemd-system.conf(5): 90 s)
SHUTDOWN_STOP_S = 90.0

__all__ = ["CampaignContext", "HostRunner", "HostState", "RunSettings", "cell_identity", "record_runtime"]


@dataclass
class HostState:
    """What the plan loop knows of its host: why it stopped, and what its slots ended as."""

    quarantined: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    given_back: str = ""  # what the host got back at the end, in words (the end message says it)


def stopped_by_a_shutdown(record: Record | None) -> TypeGuard[Record]:
    """An orderly reboot stopped the slot (someone's ``reboot``, an upgrade's): it says nothing
    of the bug, and a fixed plan runs it again in the next boot (at most SHUTDOWN_RERUNS times in a row;
    a quarantined host's next record is ``not run``, which ends the loop)."""
    return record is not None and reason_code(record.reason) is ReasonCode.HOST_SHUTDOWN


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
        self.ctx, self.host, self.plan, self.schedule = ctx, host, plan, schedule
        self.state = HostState()
        earlier = list(earlier)
        self.stops = HostStops(ctx.playbook, earlier, stopped)
        self.log = HostLog(host.name, host_events(ctx, host), lambda name, **fields: ctx.progress(name, **fields))
        self.runtimes = runtime_truth.HostRuntimes(self.log, earlier, resolved_before)  # image digests, versions
        self.sysctls = host_debug.HostDebugSysctls(self.log, ctx.playbook)  # lockup-to-panic sysctls of this boot
        self.netconsole = netconsole_setup.HostNetconsole(self.log, host.netconsole, ctx.netconsole)
        self.link = HostLink(host, port or SshHostPort(ctx, host), self.log, ctx.fleet, ctx.clock,
                             LeaseTerms(ctx.lease_token, ctx.settings.controller, ctx.campaign_id, ctx.lease_ttl_s,
                                        ctx.settings.break_leases, ctx.settings.own_leases_ended),
                             ctx.settings.watchdog.probe_timeout_s)
        self.policy = PolicyKeeper(host, self.log)
        self.link.new_boot_listeners.extend((self.policy.forget, self.sysctls.forget))
        self.recorder = SlotRecorder(ctx, host, self.runtimes.fields, lambda: self.link.boot)
        self.attempts = AttemptRunner(ctx, host, self.link, self.policy, self.sysctls, self.netconsole, self.recorder, self.log)
        self.budget = PowerBudget(ctx.settings.power_cycle_budget)
        self.preparation = HostPreparation(ctx, host, self.link, self.runtimes, self.recorder, self.budget, self.log)
        self.attempts.before_start = self.preparation.before_attempt  # Slurm's jobs; facts again after every boot
        self.recovery = bind_recovery(self)
        self.streak = InfraStreak(ctx.settings.infra_streak)
        self.may_run = {cell.name for cell, _ in plan}  # a ladder's cells this host may run (observe-only: no settings)

    # -- the whole plan --------------------------------------------------------------
    def run(self) -> None:
        try:
            self.ctx.progress(self.host.name, status="preparing")
            self.prepare_or_bring_back()
            self.record_what_ran_while_away()
        except HostNotReady as exc:
            self.ctx.event(self.host.name, CampaignEvent.NOT_READY, problems=list(exc.problems))
            self.quarantine(f"cannot run here: {exc}")
        except ReprofleetError as exc:
            self.quarantine(f"could not prepare the host: {exc}")
        except Exception as exc:  # not one of ours: a bug; this host stops, the campaign goes on
            self.quarantine(f"could not prepare the host: {type(exc).__name__}: {exc}", traceback.format_exc())
        try:
            for cell, index in self._slots():
                if self.ctx.stop.is_set() or self.link.fenced:
                    break
                if self.stops.ended_here(cell, index, self.log) or self.runtimes.moved(self.link.agent, self.stops, cell, index,
                                                                          bool(self.state.quarantined)):
                    self.ctx.progress(self.host.name, stopped_early=1)  # the plan shrinks: n/n at the end
                    if self.schedule is not None:  # a ladder would offer the same level again: this host is done
                        break
                    continue
                for _ in range(1 + SHUTDOWN_RERUNS):  # a slot an orderly reboot stopped runs again, in the next boot
                    if not stopped_by_a_shutdown(record := self.run_slot(cell, index)) or self.ctx.stop.is_set():
                        break
                    self.link.await_boot_after_shutdown(record, SHUTDOWN_STOP_S + self.ctx.playbook.timeouts.boot, self.ctx.stop)
        except ControllerDiskError as exc:
            self.ctx.fail(str(exc))
        finally:
            self._give_back()

    def _give_back(self) -> None:
        """The host's settings back, its lease released, its session closed (runner/give_back.py)."""
        if self.schedule is not None:
            self.schedule.leave(self.host.name)
        give_back = GiveBack(self.link, self.policy, self.sysctls, self.netconsole, self.ctx.settings.timings.banner_timeout_s)
        self.state.given_back = give_back(bool(self.state.quarantined), self.preparation.prepared)
        self.ctx.progress(self.host.name, status="quarantined" if self.state.quarantined else "done")

    def _slots(self) -> Iterator[tuple[Cell, int]]:
        """The fixed plan, or a search's slots as its ladder picks them; a quarantined, fenced or
        stopped host asks the ladder nothing more (a fixed plan records its slots as not run)."""
        if self.schedule is None:
            yield from self.plan
            return
        while not (self.ctx.stop.is_set() or self.link.fenced or self.state.quarantined):
            try:
                slot = self.schedule.next_slot(self.host.name)
            except Exception as exc:  # the model's bug (or a model not installed): this host stops, says why
                self.quarantine(f"the {self.schedule.plan.kind} model failed: {type(exc).__name__}: {exc}",
                                traceback.format_exc())
                return
            if slot is None or slot[0].name not in self.may_run:  # a level this host refuses: it leaves the ladder
                return
            yield slot

    # -- preparing, and a host silent at the start ---------------------------------------
    def prepare(self) -> None:
        self.attempts.pushed = self.preparation.prepare([cell for cell, _ in self.plan])

    def prepare_or_bring_back(self) -> None:
        """A host that does not answer at the start (left off or frozen by a controller that
        died mid-recovery) is brought back through the normal recovery path, then prepared;
        unless it comes back first (HostPreparation.back_before_switching says when)."""
        try:
            self.prepare()
            return
        except (LeaseError, HostKeyError):
            raise
        except ConnectError as exc:
            answer = self.link.probe()
            if answer in (ProbeAnswer.UNRESOLVED, ProbeAnswer.SSHD):
                raise  # a name that does not resolve is no proof of silence; sshd answers: not silent
            if answer is ProbeAnswer.KERNEL and self.preparation.sshd_within_boot_deadline():
                self.prepare()  # it was booting (a kill -9 during its recovery): a host like any other
                return
            if self.recovery is None or self.ctx.power is None or not self.host.pdu or self.ctx.stop.is_set():
                raise
            if (self.unrecorded() or self.preparation.seen_alive()) and self.preparation.back_before_switching():
                self.prepare()  # back: its lease decides whose it is
                return
            if self.ctx.stop.is_set():
                raise
            userspace = answer is ProbeAnswer.KERNEL
            self.ctx.fleet.silent(self.host.name, self.ctx.clock.monotonic())  # hosts silent with it hold its cycle
            self.ctx.event(self.host.name, CampaignEvent.UNREACHABLE_AT_START, reason=str(exc), kernel_answers=userspace,
                           message="switching it on / power-cycling it through its port")
        self.link.drop()
        if not self.preparation.switch_on_if_off(self.ctx.power):
            self._recover_at_start(self.recovery, userspace)
            if self.state.quarantined:
                raise ConnectError(self.host.name, self.state.quarantined)
        self.prepare()

    def _recover_at_start(self, recovery: HostRecovery, userspace: bool) -> None:
        """Frozen with its power on at the start. An attempt this campaign started on it with no
        record is the reproduction: recorded as a wedge "declared on resume", amended by recovery.
        Else (a controller died mid-recovery, after the wedge was recorded) a placeholder carries it."""
        pending = self.unrecorded()
        if not pending and not self.preparation.seen_alive():
            raise ConnectError(self.host.name, self.preparation.never_answered())
        if not pending:
            placeholder = self.recorder.infra(self.ctx.playbook.cells[0], -1, ReasonCode.UNREACHABLE_AT_START.words())
            self._settle(recovery.recover(placeholder))  # the wedge path; its record exists already
            return
        attempt_id, cell, index = pending[-1]
        why = ("userspace: the kernel answers but sshd never came back" if userspace
               else "the host stopped answering")
        declared = replace(self.recorder.infra(cell, index, "", attempt_id=attempt_id), outcome=Outcome.WEDGE,
                           reason=f"declared on resume: {why} while the controller was away")
        self.recorder.append(declared)
        self.ctx.event(self.host.name, CampaignEvent.WEDGE, attempt=attempt_id, found_on_resume=True)
        after = self._settle(recovery.recover(declared))
        self.recorder.amend(declared, after)
        self._count(after)
        self._drop_from_plan(cell, index)

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
        known = {a.id: a for a in self.link.agent().attempts()}
        for attempt_id, cell, index in pending:
            listed = known.get(attempt_id)
            if listed is None:
                self.recorder.append(self.recorder.infra(cell, index, ReasonCode.INTERRUPTED.words(
                    "the controller died before the attempt reached the host"), attempt_id=attempt_id))
                continue
            self.ctx.event(self.host.name, CampaignEvent.ATTEMPT_RESUMED, attempt=attempt_id, status=listed.status)
            resumed = self.run_slot(cell, index, resume=listed)
            if resumed is not None and not slot_runs_again(resumed.outcome.value, resumed.reason):
                self._drop_from_plan(cell, index)

    # -- one slot -------------------------------------------------------------------------
    def run_attempt(self, cell: Cell, index: int, resume: AttemptListing | None = None) -> Record:
        """One attempt through the attempt runner (a test's scripted runner replaces this seam)."""
        return self.attempts.run(cell, index, resume)

    def run_slot(self, cell: Cell, index: int, resume: AttemptListing | None = None) -> Record | None:
        """One slot: its record is written the moment its outcome is known (a wedge at its
        declaration); what recovery learns afterwards is appended as an amendment. Returns
        the slot's record as it stands at the end (None when nothing was recorded)."""
        if self.state.quarantined:
            skipped = self.recorder.not_run(cell, index, str(self.state.quarantined))
            self.recorder.append(skipped)
            return skipped
        declared: Record | None = None  # the record once it is on disk
        slot_began = self.ctx.clock.monotonic()
        try:
            self.recorder.check_disk()  # below the floor the whole campaign stops (ControllerDiskError)
            self.ctx.progress(self.host.name, status="running", cell=cell.name, attempt=index + 1, phase="")
            record = self.run_attempt(cell, index, resume) if resume is not None else self.run_attempt(cell, index)
            if self.link.fenced:  # the host is another controller's now: record nothing, touch nothing
                self._fenced_off()
                return None
            if resume is not None and record.outcome in (Outcome.WEDGE, Outcome.REBOOT):
                record = replace(record, reason=f"declared on resume: {record.reason} (while the controller was away)",
                                 boot_id=resume.boot_id or record.boot_id)
            if self.attempts.refused:  # nothing ran: say so, clear what holds the GPU, and run the slot once more
                self.recorder.append(record)
                self._count(record, refused=True)
                if self.state.quarantined:  # refused too often in a row: the streak quarantined it
                    return record
                self.preparation.reconcile_orphans(self.link.agent())
                record = self.run_attempt(cell, index)
            if record.outcome in (Outcome.WEDGE, Outcome.REBOOT) and self.link.lease_may_have_lapsed():
                record = not_declared(self.link, record)  # suspended past its lease: maybe another's doing
                self.recorder.append(record)
                self._fenced_off()
                return record
            if record.outcome in (Outcome.WEDGE, Outcome.REBOOT):
                if self.recovery is not None:  # a neighbour's cycle, or an outlet already off, explains it
                    record = self.recovery.explain(record, slot_began)
                try:
                    self.recorder.append(record)  # on disk before recovery starts
                except ControllerDiskError:  # a failed write never leaves a frozen host frozen
                    self._recover_declared(record, resume is not None, write=False)
                    raise
                declared = record
                record = self._recover_declared(record, resume is not None)
            else:
                if record.stream is None and not self.ctx.stop.is_set() and self.link.stays_silent(
                        self.ctx.settings.watchdog, self.ctx.stop, self.ctx.playbook.timeouts.boot):
                    record = self.after_unreachable(record)
                self.recorder.append(record)
        except ControllerDiskError:
            raise
        except OSError as exc:
            if exc.errno not in CONTROLLER_DISK_ERRORS:  # a socket or a host's problem: that host's
                return self._unexpected(cell, index, declared, exc)
            # the controller's own files (a stream on a full disk): stop everything
            raise ControllerDiskError(f"the controller cannot write: {exc}; the campaign stops "
                                      "(each host is given back what it can as it stops; the end says which were)"
                                      ) from exc
        except Exception as exc:  # not one of ours (or one nobody caught): a bug; recorded, never silent
            return self._unexpected(cell, index, declared, exc)
        self._count(record, refused=self.attempts.refused)
        return record

    def _recover_declared(self, record: Record, resumed: bool, write: bool = True) -> Record:
        """A declared wedge, reboot, power loss or cut, recovered and amended with what recovery found."""
        if record.outcome is Outcome.INFRA:
            after = self.after_cut(record)
        elif record.outcome is Outcome.POWER_LOSS and self.recovery is not None:
            self.link.drop()
            after = self._settle(self.recovery.switch_back_on(record))
        elif record.outcome is Outcome.WEDGE:
            after = self.after_wedge(record)
        else:
            after = self.after_reboot(record, found_on_resume=True) if resumed else self.after_reboot(record)
        after = self.netconsole.with_late_lines(after)  # a panic's text arrives after the declaration
        if write:
            self.recorder.amend(record, after)
        return after

    def _unexpected(self, cell: Cell, index: int, declared: Record | None, exc: BaseException) -> Record:
        """A bug or an error nobody caught: the host is quarantined with the traceback, the slot
        is recorded (or its declared record amended), and the other hosts go on."""
        reason = f"{type(exc).__name__}: {exc}"
        self.quarantine(f"unexpected error: {reason}", traceback.format_exc())
        if declared is None:
            declared = self.recorder.infra(cell, index, ReasonCode.UNEXPECTED_ERROR.words(reason),
                                           attempt_id=self.attempts.failed_attempt)
            self.recorder.append(declared)
        else:
            self.recorder.amend_failed(declared, reason)
        self._count(declared)
        return declared

    def _count(self, record: Record, refused: bool = False) -> None:
        """Every record once: the ladder, the infra streak, the stop rules and the live view see it.
        A refused start counts in the streak and against a search's budget (it ran nothing)."""
        if self.schedule is not None:
            self.schedule.observe(self.host.name, record, refused=refused)
        streak_over = self.streak.note(record, refused=refused)
        if streak_over is not None and not self.state.quarantined:
            self.quarantine(streak_over)
        self.stops.add(record.cell, record.outcome.value, record.last_phase, record.phases, record.reason)
        self.state.counts[record.outcome.value] = self.state.counts.get(record.outcome.value, 0) + 1
        self.ctx.progress(self.host.name, outcome=record.outcome.value, counts=dict(self.state.counts))

    def quarantine(self, reason: str, trace: str | None = None) -> None:
        """The one way a host stops taking attempts: its reason kept, and one event that says it."""
        self.state.quarantined = reason
        self.ctx.event(self.host.name, CampaignEvent.QUARANTINED, reason=reason, **({"traceback": trace} if trace else {}))

    def _fenced_off(self) -> None:  # another controller broke (or may hold) this host's lease: it writes and restores nothing
        self.ctx.event(self.host.name, CampaignEvent.FENCED, reason=self.link.fenced,
                       message=f"{self.link.fenced}; this controller stops using the host")
        self.quarantine(f"fenced: {self.link.fenced}")

    def _settle(self, recovered: Recovered) -> Record:
        """What a recovery decided: a host it could not bring back is quarantined here."""
        if recovered.quarantine is not None:
            self.quarantine(recovered.quarantine)
        return recovered.record

    def after_unreachable(self, record: Record) -> Record:
        """A host that froze between attempts: recover it like a wedge; the slot stays infra."""
        self.log.event(CampaignEvent.UNREACHABLE, attempt=record.attempt, reason=record.reason)  # Slurm: down
        self.link.drop()
        if self.recovery is None:
            self.quarantine("unreachable, and no recovery is configured")
            return record
        recovered = self._settle(self.recovery.recover(record))
        said = recovered.reason if (recovered.reason or "").startswith(record.reason or "") else record.reason
        return replace(recovered, outcome=Outcome.INFRA,  # what recovery added (a power loss) is kept
                       reason=f"{said} (the host was unreachable before the attempt; recovered)")

    def after_reboot(self, record: Record, found_on_resume: bool = False) -> Record:
        """The host reset itself under the attempt (a re-attach found a new boot): it gets the
        same post-boot forensics as a wedge, through recovery's path for a host that came back
        (or, found on resume with the host long back, the forensics alone)."""
        self.ctx.event(self.host.name, CampaignEvent.REBOOT, attempt=record.attempt, reason=record.reason,
                       **({"found_on_resume": True} if found_on_resume else {}))
        if self.recovery is None:
            return record
        if found_on_resume:
            return self._settle(self.recovery.forensics_after_the_fact(record))
        self.link.drop()
        return self._settle(self.recovery.recover(record))

    def after_cut(self, record: Record) -> Record:
        """Its power went with a neighbour's cycle: bring it back like a host that went silent
        (it comes back by itself when the neighbour's cycle switches the outlet on), and keep the
        record ``infra``: a cut is never a reproduction."""
        self.ctx.event(self.host.name, CampaignEvent.CUT_BY_NEIGHBOUR, attempt=record.attempt, reason=record.reason)
        self.link.drop()
        if self.recovery is None:
            return record
        back = self._settle(self.recovery.recover(record))
        return replace(back, outcome=Outcome.INFRA, reason=record.reason, detect_latency_s=None)

    def after_wedge(self, record: Record) -> Record:
        """Bring a wedged host back (power cycle when it has a port) and attach forensics."""
        self.log.event(CampaignEvent.WEDGE, attempt=record.attempt, latency_s=record.detect_latency_s,  # Slurm: down
                       last_phase=record.last_phase, last_log_line=record.last_log_line)
        self.link.drop()
        if self.recovery is None:
            self.quarantine("wedged, and no recovery is configured")
            return record
        return self._settle(self.recovery.recover(record))


def bind_recovery(runner: HostRunner) -> HostRecovery | None:
    """A host's recovery, bound to exactly what it uses of its runner (None: the campaign
    switches no power)."""
    ctx, power, link = runner.ctx, runner.ctx.power, runner.link
    if power is None:
        return None
    return HostRecovery(RecoveryBinding(
        host=runner.host, link=link, policy=runner.policy, log=runner.log, clock=ctx.clock, settings=ctx.settings,
        boot_deadline_s=ctx.playbook.timeouts.boot, stop=ctx.stop, fleet=ctx.fleet, power=power,
        power_of=lambda: link.port.power(power.power_log), budget=runner.budget,
        after_budget=ctx.playbook.after_budget,
        facts=lambda: read_facts(ctx.directory, runner.host.name), sysctls_in_force=lambda: runner.sysctls.applied,
        host_outlets=ctx.host_outlets, note_cut=ctx.note_cut, cut_since=ctx.cut_since,
        nmi_reboot_s=ctx.playbook.timeouts.nmi_reboot))
