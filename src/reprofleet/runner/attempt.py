"""Following one attempt's stream to its end, and judging how it ended.

The stream is written to the controller's disk line by line as it arrives. A broken SSH
session is not an outcome: the attempt runs on under the host agent, so we reconnect and
``attach`` from the last sequence number we have, with nothing lost or repeated. Only the
watchdog (silence + failed independent probes) turns silence into a wedge.

Re-attaching runs in its own thread: a connect that hangs never holds back the watchdog's
verdict or a stop, and a re-attach that fails sends the watchdog back to fresh probes.

The stream is authenticated (remote/agent.py ``AttemptKey``): the follower re-attaches with
the key of the stream it was given, and a line that fails its MAC never reaches the trace,
the stream file or the outcome; it is counted (``AttemptTrace.forged_lines``) and the stream
file says so once, in a controller ``notice`` line.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from reprofleet.clock import Clock, SystemClock
from reprofleet.config import DEFAULT_TIMINGS, Timings
from reprofleet.remote.agent import AgentClient, AttemptKey, EventStream, StreamEvent
from reprofleet.errors import AgentError, AgentFenced, AgentRefused, ConnectError, ReprofleetError
from reprofleet.model import EventKind, Outcome
from reprofleet.records.private_files import append_fd
from reprofleet.records.store import StreamWriter
from reprofleet.liveness.watchdog import Verdict, Watchdog, WedgeKind
from reprofleet.model.reasons import ReasonCode

CONTROLLER_GRACE_S = DEFAULT_TIMINGS.controller_grace_s  # past the agent's own timeout, before the controller steps in


class AttemptKeys:
    """The key of every attempt a campaign started (remote/agent.py ``AttemptKey``), kept in
    the campaign folder's ``.attempt-keys`` (0600, one ``{"attempt", "key"}`` line each, fsync'd
    before the attempt starts): a controller that died under an attempt follows it again, on
    resume, with the key it was started with. Only the controller's user may read the file; the
    host never sees it."""

    NAME = ".attempt-keys"

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / self.NAME
        self._lock = threading.Lock()

    def new(self, attempt_id: str) -> AttemptKey:
        """A fresh key for ``attempt_id``, on disk when this returns."""
        key = AttemptKey.new()
        line = (json.dumps({"attempt": attempt_id, "key": key.hex}) + "\n").encode()
        with self._lock:
            fd = append_fd(self.path)  # never through a link planted in its place
            try:
                os.fchmod(fd, 0o600)
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
        return key

    def get(self, attempt_id: str) -> AttemptKey | None:
        """The key ``attempt_id`` was started with; None for one started without (an older
        controller's), whose lines are then taken unauthenticated."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        found: AttemptKey | None = None
        for line in text.splitlines():
            try:
                entry = json.loads(line)
                if isinstance(entry, dict) and entry.get("attempt") == attempt_id:
                    found = AttemptKey.from_hex(str(entry.get("key")))
            except ValueError:
                continue  # a torn last line (the controller died writing it): that attempt never started
        return found


@dataclass
class AttemptTrace:
    """What the controller has seen of one attempt so far (mutable, one thread)."""

    next_seq: int = 0
    last_heard_wall: float | None = None
    last_heartbeat_wall: float | None = None
    last_phase: str | None = None
    last_log_line: str | None = None
    last_nvml: Mapping[str, Any] | None = None
    phases: list[tuple[float, str]] = field(default_factory=list)
    start: Mapping[str, Any] | None = None
    exit: Mapping[str, Any] | None = None
    reattached: int = 0
    forged_lines: int = 0  # lines on the stream without the attempt's MAC: ignored, counted
    clock: Clock = field(default_factory=SystemClock)  # when a line was heard, in the campaign's time

    def observe(self, event: StreamEvent) -> None:
        self.last_heard_wall = self.clock.wall()
        if event.kind is EventKind.HEARTBEAT:
            self.last_heartbeat_wall = self.last_heard_wall
            return
        if event.seq is not None:
            self.next_seq = event.seq + 1
        data = event.data
        if event.kind is EventKind.LOG:
            self.last_log_line = str(data.get("line", ""))
        elif event.kind is EventKind.PHASE:
            self.last_phase = str(data.get("phase"))
            self.phases.append((event.t, self.last_phase))
        elif event.kind is EventKind.NVML and "xid" not in data:
            self.last_nvml = dict(data)
        elif event.kind is EventKind.EXIT:
            self.exit = dict(data)
        elif event.kind is EventKind.START:
            self.start = dict(data)


STOPPED_BY_SIGNAL = ("the attempt was stopped by a SIGTERM that came neither from the controller nor from a "
                     "shutdown of the host")


def classify_exit(exit_line: Mapping[str, Any], *, boot_changed: bool) -> tuple[Outcome, str]:
    """Outcome of an attempt whose stream ended with an ``exit`` line.

    ``stopped_by`` (collectors/PROTOCOL.md) comes before the PoC's own exit status: a host
    shutting down sends SIGTERM to the PoC too, and a PoC may exit 0 on it."""
    if exit_line.get("lost"):
        if boot_changed:
            return Outcome.REBOOT, "the host rebooted by itself during the attempt"
        return Outcome.INFRA, "the agent's supervisor vanished without recording an exit"
    stopped_by = exit_line.get("stopped_by")
    if stopped_by == "host_shutdown":
        return Outcome.INFRA, ReasonCode.HOST_SHUTDOWN.words(str(exit_line.get("shutdown") or "the agent saw it stopping"))
    if exit_line.get("timed_out"):
        return Outcome.HANG, "the PoC did not finish within its timeout and was killed"
    if stopped_by == "signal":
        return Outcome.INFRA, STOPPED_BY_SIGNAL
    if exit_line.get("killed") or stopped_by == "controller":
        return Outcome.INFRA, "the attempt was stopped by the controller"
    rc = exit_line.get("rc")
    if rc == 0:
        return Outcome.CLEAN, "exit 0"
    if exit_line.get("signal"):
        return Outcome.ERROR, f"killed by signal {exit_line.get('signal')}"
    return Outcome.ERROR, f"exit {rc}"


@dataclass(frozen=True)
class AttemptEnd:
    """How following an attempt ended, before it becomes a record."""

    outcome: Outcome
    reason: str
    exit: Mapping[str, Any] | None
    detect_latency_s: float | None = None
    declared_wall: float | None = None


Reconnect = Callable[[], AgentClient]

WEDGE_REASONS = {
    WedgeKind.FROZEN: "host stopped answering: stream silent and every independent probe failed "
                      "(no echo reply, no handshake, no banner)",
    WedgeKind.USERSPACE: "userspace: the kernel answers (echo, handshake) but sshd has not sent a banner "
                         "for the whole userspace window",
}


class _Reattach(threading.Thread):
    """One re-attach in the background: reconnect, then ``attach`` from ``from_seq`` (with the
    attempt's key, when its stream had one)."""

    def __init__(self, reconnect: Reconnect, attempt_id: str, from_seq: int, key: AttemptKey | None = None) -> None:
        super().__init__(daemon=True, name="reattach")
        self._reconnect = reconnect
        self._attempt_id = attempt_id
        self._from_seq = from_seq
        self._key = key
        self.result: tuple[AgentClient, EventStream] | None = None
        self.error: str | None = None
        self.abandoned = False

    def run(self) -> None:
        try:
            agent = self._reconnect()
            stream = agent.attach(self._attempt_id, self._from_seq) if self._key is None else \
                agent.attach(self._attempt_id, self._from_seq, key=self._key)
            self.result = (agent, stream)
        except ReprofleetError as exc:
            self.error = str(exc)
        except Exception as exc:  # a thread must not die silently: the follower reads error
            self.error = f"{type(exc).__name__}: {exc}"
        if self.abandoned and self.result is not None:
            self.result[1].close()


class AttemptFollower:
    """Reads one attempt's stream until it ends, re-attaching as often as needed."""

    def __init__(
        self,
        agent: AgentClient,
        attempt_id: str,
        stream: EventStream,
        writer: StreamWriter,
        watchdog: Watchdog,
        *,
        timeout_s: float,
        reconnect: Reconnect,
        on_event: Callable[[StreamEvent], None] = lambda e: None,
        on_pause: Callable[[bool, Verdict], None] = lambda paused, why: None,
        stop: threading.Event | None = None,
        clock: Clock | None = None,
        timings: Timings = DEFAULT_TIMINGS,
    ) -> None:
        """``clock`` and ``timings``: what its waits wait on and how long (virtual in seam tests)."""
        self._clock: Clock = clock or SystemClock()
        self._timings = timings
        self.agent = agent
        self.attempt_id = attempt_id
        self._stream: EventStream | None = stream
        self._writer = writer
        self._watchdog = watchdog
        self._deadline = self._clock.monotonic() + timeout_s + timings.controller_grace_s
        self._reconnect = reconnect
        self._on_event = on_event
        self._stop = stop or threading.Event()
        self.trace = AttemptTrace(clock=self._clock)
        self.broken_reason: str | None = None
        self._paused_since: float | None = None
        self._paused_by = Verdict.CONTROLLER_NETWORK
        self._on_pause = on_pause
        self._reattach: _Reattach | None = None
        self._refused: str | None = None  # the agent would not start it: nothing ran
        self.killed = False  # this follower already told the agent to kill the attempt
        self.fenced: str | None = None  # the agent refused: another controller took the lease
        self._reattach_failures = 0
        self._next_reattach_at = 0.0
        key = getattr(stream, "key", None)  # the attempt's key, as the runner gave it to run/attach
        self._key: AttemptKey | None = key if isinstance(key, AttemptKey) else None

    @property
    def refused(self) -> bool:
        """The agent would not start the attempt (another was alive on the host): nothing ran."""
        return self._refused is not None

    def follow(self) -> AttemptEnd:
        try:
            return self._follow()
        finally:
            if self._reattach is not None:
                self._reattach.abandoned = True
            self._watchdog.close()
            self._writer.close()
            if self._stream is not None:
                self._stream.close()

    def _follow(self) -> AttemptEnd:
        while True:
            if self._stop.is_set():
                return self._interrupted()
            event = self._read_one()
            if self._refused is not None:
                return AttemptEnd(Outcome.INFRA, ReasonCode.NOT_RUN.words(self._refused), None)
            if event is not None and event.kind is EventKind.EXIT:
                outcome, reason = classify_exit(event.data, boot_changed=bool(event.data.get("rebooted")))
                return AttemptEnd(outcome, reason, event.data)
            self._reattach_done()
            verdict = self._watchdog.check()
            if verdict is Verdict.WEDGED:
                return self._wedged()
            self._note_controller_network(verdict)
            if self._paused_too_long():
                return self._network_down_end()
            if verdict is Verdict.ALIVE_BUT_DETACHED or (self._stream is None and verdict is Verdict.LIVE):
                self._try_reattach()
            if self._clock.monotonic() > self._deadline and self._paused_since is None:
                return self._overdue(verdict)

    def _read_one(self) -> StreamEvent | None:
        if self._stream is None:
            self._clock.sleep(self._timings.detached_poll_s)
            return None
        try:
            event = self._stream.next_event(self._timings.stream_read_s)
        except AgentRefused as exc:
            self._refused = f"the agent refused to start it ({exc.reason})"
            return None
        except AgentFenced as exc:  # another controller holds the lease now: nothing ran, nothing more may
            self.fenced = exc.reason
            self._refused = f"fenced: {exc.reason}"
            return None
        except (ConnectError, AgentError) as exc:
            self.broken_reason = str(exc)
            self._count_forged(self._stream)
            self._stream.close()
            self._stream = None
            return None
        self._count_forged(self._stream)
        if event is None:
            if self._stream.finished:  # the channel ended without an exit line
                self._stream.close()
                self._stream = None
            return None
        self._watchdog.heard()
        if event.seq is not None and event.seq < self.trace.next_seq:
            return None  # already written: a re-attach overlapped a stream that came back
        self._writer.write(event.raw)
        self.trace.observe(event)
        self._on_event(event)
        return event

    def _count_forged(self, stream: EventStream) -> None:
        """Lines the stream refused for their MAC: counted; the stream file says so once."""
        take = getattr(stream, "take_forged", None)
        fresh = take() if callable(take) else 0
        if not fresh:
            return
        first = self.trace.forged_lines == 0
        self.trace.forged_lines += fresh
        if first:
            self._writer.write(json.dumps({
                "t": self._clock.wall(), "k": EventKind.NOTICE.value, "by": "controller", "what": "forged_lines",
                "detail": "a line on this attempt's stream does not carry the attempt's MAC (written by something "
                          "other than the agent's supervisor, e.g. the PoC): ignored, and so is every other such line; "
                          "the record counts them",
                "first": getattr(stream, "first_forged", None)}, sort_keys=True))

    def _note_controller_network(self, verdict: Verdict) -> None:
        """Our own network down, or a correlated silence held: cycle nothing; wait.

        The time paused does not count against the attempt: the hosts are presumably still
        running it, and re-attaching afterwards recovers every line they streamed meanwhile.
        """
        now = self._clock.monotonic()
        if verdict in (Verdict.CONTROLLER_NETWORK, Verdict.HELD):
            if self._paused_since is None:
                self._paused_since = now
                self._paused_by = verdict
                self._on_pause(True, verdict)
        elif self._paused_since is not None:
            self._deadline += now - self._paused_since
            self._paused_since = None
            self._on_pause(False, self._paused_by)

    def _paused_too_long(self) -> bool:
        since = self._paused_since
        return since is not None and self._clock.monotonic() - since >= self._watchdog.settings.pause_cap_s

    def _network_down_end(self) -> AttemptEnd:
        """Our own network stayed down past the cap: say so, count nothing against the host."""
        return AttemptEnd(
            Outcome.INFRA,
            f"the controller's network stayed down for {self._watchdog.settings.pause_cap_s:g} s "
            "(the partition guard found no carrier, witness or power device answering); host not judged",
            None,
        )

    def _try_reattach(self) -> None:
        """Start a re-attach in the background (one at a time, backing off after each failure);
        never wait for it here."""
        if self._reattach is not None or self._clock.monotonic() < self._next_reattach_at:
            return
        self._reattach = _Reattach(self._reconnect, self.attempt_id, self.trace.next_seq, self._key)
        self._reattach.start()

    def _reattach_done(self) -> None:
        job = self._reattach
        if job is None or job.is_alive():
            return
        self._reattach = None
        if job.result is None:
            self.broken_reason = job.error or "re-attach failed"
            self._watchdog.reattach_failed(self.broken_reason)
            delay = min(self._timings.reattach_backoff_cap_s,
                        self._timings.reattach_backoff_s * 2 ** self._reattach_failures)
            self._reattach_failures += 1
            self._next_reattach_at = self._clock.monotonic() + delay
            return
        self._reattach_failures = 0
        if self._stream is not None:
            self._stream.close()
        self.agent, self._stream = job.result
        self.trace.reattached += 1
        self._watchdog.restart()

    def _wedged(self) -> AttemptEnd:
        now_wall = self._clock.wall()
        last = self.trace.last_heard_wall
        latency = (now_wall - last) if last else None
        return AttemptEnd(
            Outcome.WEDGE,
            WEDGE_REASONS[self._watchdog.wedge_kind or WedgeKind.FROZEN],
            None,
            detect_latency_s=latency,
            declared_wall=now_wall,
        )

    def _interrupted(self) -> AttemptEnd:
        """The controller is stopping (SIGINT/SIGTERM): stop the PoC, never count it."""
        self._kill()
        return AttemptEnd(Outcome.INFRA, ReasonCode.INTERRUPTED.words("the campaign was stopped"), None)

    def _overdue(self, verdict: Verdict) -> AttemptEnd:
        """Past the agent's timeout plus grace and still no exit line."""
        if verdict in (Verdict.LIVE, Verdict.ALIVE_BUT_DETACHED):
            self._kill()
            return AttemptEnd(Outcome.HANG, "no exit within the timeout; killed by the controller", None)
        return AttemptEnd(
            Outcome.INFRA,
            f"host not answering at the attempt deadline ({self.broken_reason or 'silent'})",
            None,
        )

    def _kill(self) -> None:
        self.killed = True
        try:
            self.agent.kill(self.attempt_id)
        except ReprofleetError:
            pass
