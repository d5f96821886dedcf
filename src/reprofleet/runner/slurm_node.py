"""A host that is a Slurm node (``slurm_node`` in its host vars, ``-i slurm:...``): taken from the
scheduler before its first attempt, never given an attempt while a job runs on it, shown down
in Slurm the moment it is declared wedged, and given back at the end.

Why a drain and not a maintenance reservation: a drain is per node and takes effect at once for
new jobs while letting the running ones finish (Slurm's "draining"), it carries a reason that
``sinfo -R`` shows to everyone, and it is exactly what LBNL NHC does, so operators already read
it. A ``flags=maint`` reservation needs a start time, a user list and a name to clean up, holds
a whole set of nodes at once, and shows no reason per node.

The rule for giving back (NHC's): resume only the nodes whose reason is this campaign's own
"taken" reason. A node someone else drained is never taken (its host is refused, its reason
kept) and never resumed; a node left down with this campaign's wedge reason (quarantined, or a
recovery that did not finish) stays down: its reason says why, for a person.

The Slurm side of a host is told through the host's own event sink (:meth:`SlurmHold.told`):
after a ``wedge`` or ``unreachable`` event is written the node is set down; after recovery's
``ready`` (the health gate passed) it is drained again. A Slurm command that fails is an event
(``slurm_error``), never a change of the attempt's outcome.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Protocol

from reprofleet.clock import Clock
from reprofleet.errors import HostNotReady, SchedulerError
from reprofleet.inventory import SLURM_VARIABLE
from reprofleet.model import Host
from reprofleet.model.events import CampaignEvent
from reprofleet.scheduler import NodeReasons, SlurmClient, SlurmJob

__all__ = ["SLURM_POWER", "SlurmHold", "SlurmNodes", "SlurmTerms", "given_back_words", "host_events", "host_hold",
           "slurm_power_problems"]

SLURM_POWER = "slurm"  # the pdu driver that cycles a node by scontrol reboot (power/drivers/slurm.py)

EventSink = Callable[..., None]  # CampaignContext.event(host, what, **fields)


@dataclass(frozen=True)
class SlurmTerms:
    """How long a node's running jobs are waited for (then its host is refused: the playbook's
    ``timeouts.slurm_jobs``), and how often ``squeue`` is asked meanwhile."""

    job_wait_s: float = 3600.0
    poll_s: float = 15.0


@dataclass
class SlurmNodes:
    """The campaign's scheduler: its client, its reasons, and one hold per Slurm host."""

    client: SlurmClient
    campaign_id: str
    terms: SlurmTerms = SlurmTerms()
    _holds: dict[str, SlurmHold] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def reasons(self) -> NodeReasons:
        return NodeReasons(self.campaign_id)

    def hold(self, host: Host, events: EventSink, progress: EventSink, clock: Clock,
             stop: threading.Event) -> SlurmHold | None:
        """The host's hold (the same one every time it is asked); None for a host that is no Slurm node."""
        node = host.vars.get(SLURM_VARIABLE)
        if not isinstance(node, str) or not node:
            return None
        with self._lock:
            if host.name not in self._holds:
                self._holds[host.name] = SlurmHold(self, host.name, node, events, progress, clock, stop)
            return self._holds[host.name]

    def give_back(self, events: EventSink) -> tuple[str, ...]:
        """Resume every node whose reason is this campaign's "taken" reason (on any host of any
        run of this campaign: a resume gives back what a dead controller took); one event says
        which were resumed and which were left, and why. The nodes resumed."""
        try:
            nodes = self.client.nodes()
        except SchedulerError as exc:
            events("", CampaignEvent.SLURM_ERROR, action="give back", error=str(exc),
                   message=f"nodes NOT given back: {exc}; resume those with reason {self.reasons.taken()!r} by hand")
            return ()
        resumed, left = [], {}
        for node in nodes:
            if self.reasons.held_for_attempts(node.reason):
                try:
                    self.client.resume(node.name)
                    resumed.append(node.name)
                except SchedulerError as exc:
                    left[node.name] = f"resume failed: {exc}"
            elif self.reasons.ours(node.reason):
                left[node.name] = f"left {node.state_words} for a person: {node.reason}"
        if resumed or left:
            events("", CampaignEvent.SLURM_GIVEN_BACK, resumed=resumed, left=left,
                   message=given_back_words(resumed, left))
        return tuple(resumed)


def slurm_power_problems(hosts: Iterable[Host], client: SlurmClient) -> list[str]:
    """One line per host whose power device is Slurm (``pdu: {driver: slurm}``, or a fallback)
    when the cluster does not let slurmctld reboot a node itself (``reboot_from_controller`` and a
    RebootProgram): such a cycle would ask a hard-locked node to run its own RebootProgram.
    Slurm is asked once, and only when some host needs it."""
    ports = {host.name: port for host in hosts
             for port in (*host.power_ports, *(p for level in host.power_fallbacks for p in level))
             if port.driver == SLURM_POWER}
    if not ports:
        return []
    try:
        support = client.reboot_support()
    except SchedulerError as exc:
        return [f"{port.where + ': ' if port.where else ''}{name}: pdu driver slurm: cannot read Slurm's "
                f"configuration ({exc})" for name, port in ports.items()]
    if support.allowed:
        return []
    return [f"{port.where + ': ' if port.where else ''}{name}: pdu driver slurm: scontrol reboot cannot cycle a "
            f"hard-locked node on this cluster: {support.why_not}" for name, port in ports.items()]


def given_back_words(resumed: Iterable[str], left: dict[str, str]) -> str:
    said = f"Slurm nodes resumed: {', '.join(resumed) or 'none'}"
    return said + "".join(f"; {name} {why}" for name, why in left.items())


class SlurmHold:
    """One host's node: taken, kept free of jobs, set down on a wedge, drained again when healthy."""

    def __init__(self, nodes: SlurmNodes, host: str, node: str, events: EventSink, progress: EventSink,
                 clock: Clock, stop: threading.Event) -> None:
        self.nodes, self.host, self.node = nodes, host, node
        self._events, self._progress, self.clock, self.stop = events, progress, clock, stop
        self.reasons = nodes.reasons
        self.client = nodes.client

    def _event(self, what: CampaignEvent, **fields: Any) -> None:
        self._events(self.host, what, node=self.node, **fields)

    # -- before the first attempt, and before every attempt ------------------------------
    def take(self) -> None:
        """Drain the node with this campaign's reason (unless it already carries one of ours),
        then wait for its jobs. A node someone else took out of service is refused, untouched."""
        try:
            node = self.client.node(self.node)
            if not self.reasons.ours(node.reason):
                if node.held_by_someone:
                    raise HostNotReady(self.host, [
                        f"Slurm node {self.node} is {node.state_words} by {node.reason_by or 'someone'}: "
                        f"{node.reason or 'no reason'!r}; not this campaign's to take (resume it in Slurm first)"])
                self.client.drain(self.node, self.reasons.taken())
                self._event(CampaignEvent.SLURM_TAKEN, reason=self.reasons.taken(), was=node.state_words)
        except SchedulerError as exc:
            raise HostNotReady(self.host, [f"Slurm node {self.node} could not be taken: {exc}"]) from None
        self.wait_for_jobs()

    def before_attempt(self) -> None:
        """No attempt starts while a job runs on the node: a job that landed since (in the instant
        between a resume and the drain after a power cycle, or after someone resumed the node) is
        waited for, and a node someone resumed is drained again."""
        try:
            node = self.client.node(self.node)
            if not node.held_by_someone:
                self.client.drain(self.node, self.reasons.taken())
                self._event(CampaignEvent.SLURM_TAKEN, reason=self.reasons.taken(), was=node.state_words, again=True)
        except SchedulerError as exc:
            raise HostNotReady(self.host, [f"Slurm node {self.node}: {exc}"]) from None
        self.wait_for_jobs()

    def wait_for_jobs(self) -> None:
        """Until ``squeue -w NODE`` lists no job, bounded by the terms; HostNotReady after."""
        terms = self.nodes.terms
        start = self.clock.monotonic()
        jobs = self._jobs()
        if not jobs:
            return
        self._event(CampaignEvent.SLURM_JOBS_WAITING, jobs=[job.words() for job in jobs], up_to_s=terms.job_wait_s,
                    message=f"{len(jobs)} Slurm job(s) run on {self.node}: no attempt until they end "
                            f"(up to {terms.job_wait_s:g} s)")
        self._progress(self.host, status=f"waiting for {len(jobs)} Slurm job(s), up to {terms.job_wait_s:g} s")
        while jobs:
            left = start + terms.job_wait_s - self.clock.monotonic()
            if left <= 0 or self.stop.is_set():
                raise HostNotReady(self.host, [f"{len(jobs)} Slurm job(s) still run on {self.node} after "
                                               f"{self.clock.monotonic() - start:.0f} s, the bound "
                                               f"(timeouts.slurm_jobs {terms.job_wait_s:g} s): "
                                               + ", ".join(job.words() for job in jobs[:5])])
            if self.clock.wait(self.stop, min(terms.poll_s, left)):
                continue  # stopped: the loop's check says so
            jobs = self._jobs()
        self._event(CampaignEvent.SLURM_JOBS_ENDED, waited_s=round(self.clock.monotonic() - start, 1))
        self._progress(self.host, status="preparing")

    def _jobs(self) -> tuple[SlurmJob, ...]:
        try:
            return self.client.jobs_on(self.node)
        except SchedulerError as exc:
            raise HostNotReady(self.host, [f"cannot tell which Slurm jobs run on {self.node}: {exc}"]) from None

    # -- what the host's events tell Slurm ---------------------------------------------
    def told(self, what: CampaignEvent, fields: dict[str, Any]) -> None:
        """After the host's event is written: a wedge or a silence sets the node down with a
        reason people read; recovery's ``ready`` (the health gate passed) drains it again."""
        if what is CampaignEvent.WEDGE:
            self._change("down", self.reasons.wedged(fields.get("last_phase"), fields.get("attempt")))
        elif what is CampaignEvent.UNREACHABLE:
            self._change("down", self.reasons.unreachable(fields.get("attempt")))
        elif what is CampaignEvent.RECOVERY and fields.get("to") == "ready":
            self._back_to_drain()

    def _change(self, state: str, reason: str) -> None:
        """Down with ``reason``, unless someone else has taken the node meanwhile: their reason
        is kept (writing ours over it would make the end resume a node they drained)."""
        try:
            node = self.client.node(self.node)
            if node.held_by_someone and not self.reasons.ours(node.reason):
                self._event(CampaignEvent.SLURM_ERROR, action=state, error=f"not set {state}: {node.state_words} "
                            f"by {node.reason_by or 'someone'} ({node.reason!r}), whose reason is kept")
                return
            self.client.down(self.node, reason)
            self._event(CampaignEvent.SLURM_DOWN, reason=reason)
        except SchedulerError as exc:
            self._event(CampaignEvent.SLURM_ERROR, action=state, error=str(exc))

    def _back_to_drain(self) -> None:
        """Slurm has no single command from down to drained: ``resume`` clears both DOWN and
        DRAIN (tests/fixtures/slurm/README.md), so the drain follows at once, and the next
        attempt's :meth:`before_attempt` waits for any job that landed in between."""
        try:
            node = self.client.node(self.node)
            if not self.reasons.ours(node.reason):
                return  # someone else's reason now: theirs to give back
            if node.down:
                self.client.resume(self.node)
            self.client.drain(self.node, self.reasons.taken())
            self._event(CampaignEvent.SLURM_TAKEN, reason=self.reasons.taken(), was=node.state_words, again=True)
        except SchedulerError as exc:
            self._event(CampaignEvent.SLURM_ERROR, action="drain after recovery", error=str(exc))

    def sink(self, events: EventSink) -> EventSink:
        """``events`` (the campaign's event writer), with this node told after each of the host's events."""
        def write(host: str, what: CampaignEvent, **fields: Any) -> None:
            events(host, what, **fields)
            self.told(CampaignEvent(what), fields)
        return write


class SlurmCampaign(Protocol):
    """What a host's hold uses of the campaign (runner/context.py's CampaignContext, which
    imports this module: naming it here would close an import cycle)."""

    @property
    def slurm(self) -> SlurmNodes | None: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def stop(self) -> threading.Event: ...

    @property
    def progress(self) -> Callable[..., None]: ...

    def event(self, host: str, what: CampaignEvent, **fields: Any) -> None: ...


def host_hold(ctx: SlurmCampaign, host: Host) -> SlurmHold | None:
    """The host's hold when the campaign runs on Slurm nodes and this host is one."""
    if ctx.slurm is None:
        return None
    return ctx.slurm.hold(host, ctx.event, lambda name, **fields: ctx.progress(name, **fields), ctx.clock, ctx.stop)


def host_events(ctx: SlurmCampaign, host: Host) -> EventSink:
    """The sink a host's runner writes its events through: the campaign's, and its Slurm node told."""
    hold = host_hold(ctx, host)
    return ctx.event if hold is None else hold.sink(ctx.event)
