"""One attempt on one host, from its settings to its record: the cell's GPU policy ensured, the
lockup sysctls and netconsole in place, the cache folder ready, the PoC started through the
agent (or a dead controller's attempt followed from its first line), its stream on disk as it
arrives, its end judged (runner/attempt.py) and its record built (runner/slot_record.py).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from reprofleet.errors import AgentError, AgentFenced, ReprofleetError
from reprofleet.liveness.watchdog import Verdict, Watchdog
from reprofleet.model import Cell, EventKind, Host, Outcome, Record
from reprofleet.model.events import CampaignEvent
from reprofleet.model.reasons import ReasonCode
from reprofleet.power.wall import WallPowerSampler
from reprofleet.records.store import StreamWriter, iso_utc
from reprofleet.remote import host_commands
from reprofleet.remote.agent import AgentClient, StreamEvent
from reprofleet.remote.replies import AttemptListing
from reprofleet.runner import cache_sync, gpu_policy as policy, poc
from reprofleet.runner.attempt import AttemptEnd, AttemptFollower, AttemptKeys
from reprofleet.runner.context import CampaignContext
from reprofleet.runner.host_debug import HostDebugSysctls
from reprofleet.runner.host_log import HostLog
from reprofleet.runner.link import HostLink
from reprofleet.runner.netconsole import HostNetconsole
from reprofleet.runner.policy_keeper import PolicyKeeper
from reprofleet.runner.slot_record import SlotRecorder

__all__ = ["AttemptRunner", "PushedFiles"]


@dataclass(frozen=True)
class PushedFiles:
    """What preparing the host put on it for the attempts: the PoC, and the starting cache."""

    poc_path: str = ""
    cache_seed: str | None = None  # path of the uploaded starting cache on the host


class AttemptRunner:
    """Runs one attempt at a time on one host and returns its record."""

    def __init__(self, ctx: CampaignContext, host: Host, link: HostLink, policy_keeper: PolicyKeeper,
                 sysctls: HostDebugSysctls, netconsole: HostNetconsole, recorder: SlotRecorder, log: HostLog) -> None:
        self.ctx = ctx
        self.host = host
        self.link = link
        self.policy = policy_keeper
        self.sysctls = sysctls
        self.netconsole = netconsole
        self.recorder = recorder
        self.log = log
        self.pushed = PushedFiles()
        self.refused = False  # the last start was refused by the agent (another attempt alive)
        self.failed_attempt: str | None = None  # an attempt a bug or a full disk interrupted
        self.cache_manifest: str | None = None
        self.cache_snapshot: str | None = None  # the snapshot the current attempt's cache was built from (seeded)
        self.wall: WallPowerSampler | None = None  # the current attempt's wall-power sampler
        self.before_start: Callable[[AgentClient], None] = lambda agent: None
        self.keys = AttemptKeys(ctx.directory.root)  # each attempt's MAC key, kept for a resume's follow

    def run(self, cell: Cell, index: int, resume: AttemptListing | None = None) -> Record:
        """One attempt of ``cell``: started now, or (``resume``) one a dead controller started,
        followed from its first line without touching the GPU's settings under it."""
        attempt_id = resume.id if resume is not None else str(uuid.uuid4())
        started = str(iso_utc(self.ctx.clock.wall()))  # the clock every event of the campaign is stamped by
        begun = self.ctx.clock.monotonic() if resume is None else None  # a start the agent fences by the lease
        readback: Mapping[str, Any] | None = None
        follower: AttemptFollower | None = None
        debug: dict[str, Any] | None = None
        generation = self.link.attempt_generation()
        try:
            agent = self.link.agent()
            self.link.current_boot(agent)
            self.before_start(agent)  # facts read again in a boot they were not read in
            if resume is not None:
                readback = policy.read(agent, self.host.gpu_index) if resume.status == "running" else None
                follower = self._follow_existing(agent, attempt_id, generation)
            else:
                readback = self.policy.ensure(agent, cell.gpu)
                debug = self.sysctls.ensure(agent, cell.host_debug)
                self.netconsole.ensure(agent, self.link.boot.boot_id)
                self.log.event(CampaignEvent.ATTEMPT_STARTED, attempt=attempt_id, cell=cell.name, index=index)
                follower = self._start(agent, cell, attempt_id, generation)
            self.log.progress(cell=cell.name, attempt=index + 1, phase="starting")
            end = follower.follow()
        except AgentFenced as exc:
            self.link.fenced = str(exc)
            end = AttemptEnd(Outcome.INFRA, ReasonCode.NOT_RUN.words(f"fenced: {exc}"), None)
        except ReprofleetError as exc:
            end = AttemptEnd(Outcome.INFRA, str(exc), None)
        except BaseException as exc:  # a bug, a full disk: the attempt must not run on unwatched
            if follower is not None:
                self.failed_attempt = attempt_id  # its infra record keeps the id that ran
                self.link.stop_attempt(attempt_id, f"{type(exc).__name__}: {exc}")
            raise
        finally:
            self.link.end_attempt()
            if self.wall is not None:
                self.wall.stop()
            self.netconsole.unfollow()
        return self._ended(cell, index, attempt_id, started, end, readback, follower, debug, begun)

    def _ended(self, cell: Cell, index: int, attempt_id: str, started: str, end: AttemptEnd,
               readback: Mapping[str, Any] | None, follower: AttemptFollower | None,
               debug: dict[str, Any] | None, begun: float | None = None) -> Record:
        self.refused = follower is not None and follower.refused
        if follower is not None and follower.fenced:
            self.link.fenced = follower.fenced
        elif follower is not None and not self.refused and begun is not None:
            self.link.held_now(begun)  # the agent took the start under this controller's token
        if follower is not None and not follower.refused and not follower.killed and end.exit is None \
                and end.outcome is Outcome.INFRA:  # it ended without the PoC's own exit: stop what may still run
            self.link.stop_attempt(attempt_id, end.reason or "the attempt ended without its exit line")
        if self.refused:
            self.log.event(CampaignEvent.START_REFUSED, attempt=attempt_id, cell=cell.name, index=index,
                           reason=end.reason)
        else:
            self.link.boot.attempts_in_boot += 1
        record = self.recorder.attempt(cell, index, attempt_id, started, end, readback,
                                       follower.trace if follower else None, followed=follower is not None,
                                       cache_manifest=self.cache_manifest, cache_snapshot=self.cache_snapshot,
                                       wall=self.wall)
        return replace(record, host_debug=debug, kernel_net=self.netconsole.record_lines(end.outcome))

    def _start(self, agent: AgentClient, cell: Cell, attempt_id: str, generation: int) -> AttemptFollower:
        state_root = f"{self.link.home}/.cache/reprofleet"
        mode = self.ctx.playbook.poc.mode(cell)
        command = poc.build(cell, poc_path=self.pushed.poc_path, state_root=state_root,
                            attempt_id=attempt_id, persistent=mode == "persistent",
                            gpu=self.host.gpu_index, seeded=mode == "seeded",
                            secret_names=tuple(self.ctx.env_secrets))
        self.cache_snapshot = cache_sync.seed_attempt(self.ctx, agent, cell, command.cache_dir)
        prepared = host_commands.run_command(agent, host_commands.prepare_cache(
            command.cache_dir, None if self.cache_snapshot else self.pushed.cache_seed))
        if not prepared.ok:
            raise AgentError(self.host.name, f"cannot prepare the cache {command.cache_dir}: {prepared.error}")
        self.cache_manifest = host_commands.run_command(agent, host_commands.cache_manifest(command.cache_dir))
        timeout = self.ctx.playbook.timeouts.attempt
        key = self.keys.new(attempt_id)  # on disk before the host hears of the attempt
        stream = agent.run(attempt_id, list(command.argv), timeout=timeout, env=dict(command.env),
                           secrets=self.ctx.env_secrets, key=key,
                           gpu=self.host.gpu_index, sample_hz=self.ctx.settings.sample_hz,
                           clock_threshold=self.ctx.settings.clock_threshold_mhz, container=command.container)
        writer = self._writer(attempt_id)
        self._start_wall(writer)  # a host frozen at 400 W and one at 60 W are different bugs
        self.netconsole.follow(attempt_id, writer.write)  # the kernel's lines over the network
        return self._follower(agent, attempt_id, stream, writer, generation)

    def _follow_existing(self, agent: AgentClient, attempt_id: str, generation: int) -> AttemptFollower:
        """Re-read a dead controller's attempt from its first line (the stream file starts again)."""
        key = self.keys.get(attempt_id)  # None only for an attempt an older controller started
        stream = agent.attach(attempt_id, 0) if key is None else agent.attach(attempt_id, 0, key=key)
        writer = self._writer(attempt_id, fresh=True)
        self._start_wall(writer)
        return self._follower(agent, attempt_id, stream, writer, generation)

    def _writer(self, attempt_id: str, fresh: bool = False) -> StreamWriter:
        """The attempt's stream file, under its cap and the campaign's (records/disk_caps.py)."""
        return StreamWriter(self.ctx.directory.stream_path(attempt_id), fresh=fresh, caps=self.ctx.settings.disk,
                            budget=self.ctx.disk_budget, wall=self.ctx.clock.wall)

    def _start_wall(self, writer: StreamWriter) -> None:
        """Wall power, where an outlet meters it, into the attempt's stream."""
        self.wall = self.link.port.wall_sampler(lambda line: writer.write(json.dumps(line, sort_keys=True)))
        self.wall.start()

    def _follower(self, agent: AgentClient, attempt_id: str, stream: Any, writer: StreamWriter,
                  generation: int) -> AttemptFollower:
        watchdog = Watchdog(self.host.name, self.link.probe, self.ctx.settings.watchdog, self.ctx.fleet,
                            clock=self.ctx.clock.monotonic)
        return AttemptFollower(agent, attempt_id, stream, writer, watchdog,
                               timeout_s=self.ctx.playbook.timeouts.attempt,
                               reconnect=lambda: self.link.connect(generation),
                               on_event=self._on_event, on_pause=self._on_pause, stop=self.ctx.stop,
                               clock=self.ctx.clock, timings=self.ctx.settings.timings)

    def _on_pause(self, paused: bool, why: Verdict = Verdict.CONTROLLER_NETWORK) -> None:
        held = why is Verdict.HELD
        if paused and held:
            self.log.progress(status="held: silent with other hosts (their switch?)")
        elif paused:
            self.log.event(CampaignEvent.CONTROLLER_NETWORK_SUSPECT,
                           message="every host went silent at once: suspecting the controller's own network; "
                                   "no power action, waiting for hosts to answer")
            self.log.progress(status="paused: controller network?")
        else:
            if not held:
                self.log.event(CampaignEvent.CONTROLLER_NETWORK_BACK)
            self.log.progress(status="running")

    def _on_event(self, event: StreamEvent) -> None:
        if event.kind is EventKind.PHASE:
            self.log.progress(phase=str(event.data.get("phase")))
