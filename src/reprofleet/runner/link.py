"""One host's link: its session and agent, the boot it is in, its lease, and stopping an attempt.

Every other part of a host's runner (the policy keeper, the attempt, recovery) reaches the
host through this object, so there is one place that (re)connects. Connecting is guarded by
one lock and a generation: an attempt's re-attach thread connects under the generation the
attempt began in, and a connect that finishes after the attempt ended (a slow handshake that
outlived a wedge verdict) closes its own session instead of replacing, and closing, the one
recovery is using by then.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from reprofleet.errors import ConnectError, LeaseError, ReprofleetError
from reprofleet.liveness.probes import ProbeAnswer
from reprofleet.liveness.watchdog import FleetLiveness, WatchdogSettings
from reprofleet.clock import Clock
from reprofleet.model import Host, Record
from reprofleet.model.events import CampaignEvent
from reprofleet.remote import host_commands
from reprofleet.remote.agent import AgentClient
from reprofleet.remote.transport import Session
from reprofleet.runner.host_log import HostLog
from reprofleet.runner.port import HostPort

__all__ = ["BootState", "HostLink", "LeaseTerms"]


@dataclass
class BootState:
    """The boot the host is in, as this controller last read it."""

    boot_id: str | None = None
    attempts_in_boot: int = 0
    uptime_at_boot_check: float | None = None

    @property
    def cold(self) -> bool:
        """The first attempt of a boot that was young when first seen (a cold GPU)."""
        return self.attempts_in_boot == 1 and (self.uptime_at_boot_check or 1e9) < 900


@dataclass(frozen=True)
class LeaseTerms:
    """What this controller run puts in a host's lease (collectors/host_lease.py)."""

    token: str
    controller: str
    campaign: str
    ttl_s: float
    break_leases: bool = False
    own_ended: bool = False  # a requeued Slurm job: Slurm ended the earlier run that held leases under this name


@dataclass
class HostLink:
    """The one connection to one host, and what the controller knows of the boot it is in."""

    host: Host
    port: HostPort
    log: HostLog
    fleet: FleetLiveness
    clock: Clock
    lease: LeaseTerms
    probe_timeout_s: float
    boot: BootState = field(default_factory=BootState)
    home: str = ""
    leased: bool = False
    fenced: str | None = None  # another controller took the lease: nothing may act on the host again
    lease_held_at: float | None = None  # (monotonic) the host last showed this controller holds its lease
    new_boot_listeners: list[Callable[[], None]] = field(default_factory=list)  # what a new boot makes stale
    _session: Session | None = None
    _agent: AgentClient | None = None
    _generation: int = 0
    _lock: threading.RLock = field(default_factory=threading.RLock)

    # -- connecting ----------------------------------------------------------------------
    def connect(self, generation: int | None = None) -> AgentClient:
        """A fresh session and agent client; the old session is closed once the new one is in.

        ``generation``: the attempt a re-attach belongs to; when that attempt has ended by the
        time the handshake finishes, the new session is closed and nothing is replaced."""
        agent = self.port.connect()  # outside the lock: a slow handshake holds nobody back
        with self._lock:
            if generation is not None and generation != self._generation:
                agent.session.close()
                raise ConnectError(self.host.name, "a re-attach finished after its attempt ended; dropped")
            self._close_locked()
            self.fleet.heard(self.host.name, self.clock.monotonic())  # it answers: no longer silent
            agent.lease_token = self.lease.token
            self._session, self._agent = agent.session, agent
            if not self.home:
                self.home = host_commands.run_command(agent, host_commands.home_folder())
        return agent

    def agent(self) -> AgentClient:
        """The live agent, connecting afresh when there is none or its session died."""
        with self._lock:
            agent, session = self._agent, self._session
        if agent is None or session is None or not session.alive:
            return self.connect()
        return agent

    @property
    def connected(self) -> bool:
        with self._lock:
            return self._agent is not None

    @property
    def current_agent(self) -> AgentClient | None:
        """The agent as it is, without connecting (None after a drop)."""
        with self._lock:
            return self._agent

    def attempt_generation(self) -> int:
        """A new attempt begins: re-attaches of earlier attempts may no longer replace the session."""
        with self._lock:
            self._generation += 1
            return self._generation

    def end_attempt(self) -> None:
        with self._lock:
            self._generation += 1

    def drop(self) -> None:
        """The host went away under this session: close it; the next step connects afresh."""
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self._session is not None:
            self._session.close()
        self._session, self._agent = None, None

    # -- probes ---------------------------------------------------------------------------
    def probe(self) -> ProbeAnswer:
        """Independent of the attempt's connection: SSHD (a banner), KERNEL (echo or handshake) or DEAD."""
        return self.port.probe(self.probe_timeout_s)

    def banner(self, timeout_s: float) -> bool:
        return self.port.banner(timeout_s)

    def stays_silent(self, watchdog: WatchdogSettings, stop: threading.Event, boot_deadline_s: float) -> bool:
        """An attempt could not even start: is the host gone? Every probe failing for the confirm
        window, or (the same rule as at campaign start) a kernel that answers while sshd does not
        come back within the boot deadline: a userspace wedge. Then the fleet hears it went
        silent (hosts silent with it hold its recovery)."""
        began = self.clock.monotonic()
        deadline = began + watchdog.confirm_s
        while self.clock.monotonic() < deadline and not stop.is_set():
            answer = self.probe()
            if answer is ProbeAnswer.SSHD:
                return False
            if answer is ProbeAnswer.KERNEL:  # booting, or its userspace is gone: sshd has the boot deadline
                if self.sshd_by(began + boot_deadline_s, stop, watchdog.probe_interval_s):
                    return False
                break
            self.clock.wait(stop, watchdog.probe_interval_s)
        if stop.is_set():
            return False
        self.fleet.silent(self.host.name, began)
        return True

    def sshd_by(self, deadline: float, stop: threading.Event, poll_s: float) -> bool:
        """Does sshd answer a probe before ``deadline`` (monotonic)?"""
        while self.clock.monotonic() < deadline and not stop.is_set():
            if self.probe() is ProbeAnswer.SSHD:
                return True
            self.clock.wait(stop, poll_s)
        return False

    # -- the boot --------------------------------------------------------------------------
    def note_boot(self, boot_id: str, uptime_s: float) -> bool:
        """Record the boot the host is in; True (and every listener told) when it is a new one."""
        if boot_id == self.boot.boot_id:
            return False
        self.boot = BootState(boot_id, 0, uptime_s)
        for forget in self.new_boot_listeners:
            forget()  # the driver forgot -lgc/-pl, the kernel its sysctls: re-apply
        return True

    def current_boot(self, agent: AgentClient) -> str:
        """The host's boot_id now (read through ``agent``), noted."""
        now = host_commands.run_command(agent, host_commands.boot_now())
        self.note_boot(now.boot_id, now.uptime_s)
        return now.boot_id

    def boot_now(self) -> str | None:
        """A fresh connection's boot_id, or None when the host does not answer."""
        try:
            return self.current_boot(self.connect())
        except ReprofleetError:
            return None

    def await_new_boot(self, old_boot: str | None, deadline: float, stop: threading.Event,
                       poll_s: float) -> str | None:
        """After the host said it is shutting down: the boot_id of the next boot once sshd
        answers in one (noted), or None at ``deadline`` (monotonic) or a stop. A stopping host
        may still take logins through the session or sshd it has left, and whatever starts
        there is stopped with the rest; so nothing is run until the boot changes."""
        self.drop()
        while self.clock.monotonic() < deadline and not stop.is_set():
            if self.probe() is ProbeAnswer.SSHD:
                now = self.boot_now()
                if now is not None and now != old_boot:
                    return now
                self.drop()
            self.clock.wait(stop, poll_s)
        return None

    def await_boot_after_shutdown(self, record: Record, wait_s: float, stop: threading.Event) -> None:
        """The host is going down in order: the slot's next attempt waits for the next boot. Run at
        once, it would start on the stopping host (through a session or an sshd not yet stopped)
        and be stopped with it: one slot's reruns spent on one shutdown, with the attempts counted
        in a boot that has ended. A host still in the same boot after ``wait_s`` (a cancelled
        shutdown, a poweroff) goes on as it is: its next slot finds out. It looks once a probe
        timeout (each look is a probe, and a connection when sshd answers). A shutdown recovery
        already saw through (the silence became a reboot) left the link in the new boot: nothing to wait for."""
        old_boot = record.boot_id
        began = self.clock.monotonic()
        known = self.boot.boot_id
        new_boot = known if known not in (None, old_boot) else \
            self.await_new_boot(old_boot, began + wait_s, stop, self.probe_timeout_s)
        self.log.event(CampaignEvent.BOOT_AWAITED, why="host_shutdown", old_boot_id=old_boot, boot_id=new_boot,
                       waited_s=round(self.clock.monotonic() - began, 1))

    # -- the lease ---------------------------------------------------------------------------
    def take_lease(self, agent: AgentClient) -> None:
        """No two controllers run attempts on one host: take its lease, or refuse the host.

        A live lease under another token is refused, the same campaign's too (a second
        controller resumed while the first still runs), unless ``--break-lease``; one left by
        this campaign's own controller on this machine whose process is gone (a kill -9, a
        crash) is taken over at once, and the event says why.
        """
        def acquire(break_lease: bool) -> Any:
            return agent.lease("acquire", controller=self.lease.controller, campaign=self.lease.campaign,
                               pid=os.getpid(), break_lease=break_lease, ttl_s=self.lease.ttl_s)

        answer = acquire(self.lease.break_leases)
        why = "--break-lease"
        if not answer.ok and self._left_by_this_jobs_ended_run(answer.held):
            answer, why = acquire(True), "it was this Slurm job's earlier run, which Slurm ended when it requeued the job"
        elif not answer.ok and self._left_by_a_dead_controller_here(answer.held):
            answer, why = acquire(True), "its controller process on this machine is gone"
        if not answer.ok:
            raise LeaseError(self.host.name, answer.error or "the host's lease was refused")
        if answer.broken:
            self.log.event(CampaignEvent.LEASE_BROKEN, previous=dict(answer.broken),
                           why="it had expired" if answer.broken.get("expired") else why)
        self.leased = True
        self.held_now()

    def held_now(self, at: float | None = None) -> None:
        """The host showed this controller holds its lease (it took it, or the agent accepted a
        fenced request under its token, at ``at``): the lease runs a TTL from there."""
        self.lease_held_at = self.clock.monotonic() if at is None else at

    def lease_may_have_lapsed(self) -> str | None:
        """Why this controller may no longer hold the host (None: it does). A live controller
        shows it holds the lease at least once per TTL (every attempt start); one that was
        suspended longer (a laptop asleep, a SIGSTOP) may find the host another campaign's: it
        must not declare that host wedged or switch its power on its own word."""
        if self.lease_held_at is None:
            return None  # never leased (observe-only, or before the first prepare): nothing to lose
        idle = self.clock.monotonic() - self.lease_held_at
        if idle <= self.lease.ttl_s:
            return None
        return (f"this controller last held the host's lease {idle:.0f} s ago, longer than its TTL "
                f"({self.lease.ttl_s:.0f} s): another campaign may hold the host now")

    def _left_by_this_jobs_ended_run(self, held: Mapping[str, Any] | None) -> bool:
        """A requeued shard's own lease: same campaign, same controller name (the shard and its
        Slurm job id, runner-independent), and Slurm says the run that held it ended. Another
        shard's lease (another name) is never taken this way: it is refused, host by host."""
        return bool(self.lease.own_ended and held and held.get("campaign") == self.lease.campaign
                    and held.get("controller") == self.lease.controller)

    def _left_by_a_dead_controller_here(self, held: Mapping[str, Any] | None) -> bool:
        if not held or held.get("campaign") != self.lease.campaign \
                or held.get("controller") != self.lease.controller:
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
        agent = self.current_agent
        if not self.leased or agent is None or self.fenced:
            return
        try:
            agent.lease("release", campaign=self.lease.campaign)
            self.leased = False
        except ReprofleetError as exc:
            self.log.event(CampaignEvent.LEASE_RELEASE_FAILED, error=str(exc))

    # -- stopping an attempt ----------------------------------------------------------------
    def stop_attempt(self, attempt_id: str, why: str) -> bool:
        """Best effort: kill an attempt that ended without its PoC's own exit, and say so.

        Every such end (the controller's network down past the cap, a host silent at the
        deadline, recovery finding the host alive, a bug, a full disk) would otherwise leave
        the PoC on the GPU, and the next attempt would be refused or run beside it.
        """
        try:
            reply = self.agent().kill(attempt_id)
        except ReprofleetError as exc:
            self.log.event(CampaignEvent.ATTEMPT_KILLED, attempt=attempt_id, why=why, ok=False, error=str(exc))
            return False
        self.log.event(CampaignEvent.ATTEMPT_KILLED, attempt=attempt_id, why=why, ok=True,
                       was_running=reply.was_running, **reply.container_fields())
        return True

    def close(self) -> None:
        self.drop()
