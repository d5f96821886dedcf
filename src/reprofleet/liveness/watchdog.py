"""Liveness of a host during an attempt: silence, then rounds of independent probes, a verdict.

The attempt stream carries a heartbeat at least every half second. After ``probe_after_s``
of silence the host is a *suspect* and is probed independently of the stalled connection
(:mod:`probes`: ICMP echo + TCP/SSH banner) in rounds every ``probe_interval_s``; a round
never waits for an earlier one's timeout, so a frozen host's answers (all DEAD) arrive on
a steady grid. Each round answers DEAD, KERNEL or SSHD (or UNRESOLVED: the host's name did
not resolve that round, which breaks a run of DEAD rounds and the userspace window: no verdict
rests on a round that could not ask the host):

- a *frozen* wedge needs the stream silent for ``silence_s`` AND the last ``dead_rounds``
  rounds all DEAD AND the partition guard saying our own network works;
- a *userspace* wedge is KERNEL without SSHD for ``userspace_s``: the kernel answers, nothing
  else does (a long SIGSTOP, a starved CPU or a short stall stays well below it);
- a silent stream with a host whose sshd answers is re-attached, never cycled.

Answers are never sticky: a suspect that answered once and then went DEAD is judged by its
latest rounds. If the guard says our own network is down (no carrier, no witness, no PDU
answers), or, without a guard, every watched host went silent within one window,
:class:`FleetLiveness` holds every verdict back (cycle nothing) until hosts answer again.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from enum import Enum, unique
from typing import Any, Callable, Mapping, Protocol, Sequence

from reprofleet.config import DEFAULT_TIMINGS, Timings
from reprofleet.liveness.probes import ProbeAnswer
from reprofleet.liveness.peer_evidence import AnswerLog, dead_window, vouched_run
from reprofleet.liveness.rounds import Probe, ProbeRounds, Round
from reprofleet.liveness.silence_hold import HoldRule, SilenceHold, judge_silence
from reprofleet.model.events import CampaignEvent


@dataclass(frozen=True)
class WatchdogSettings:
    """The watchdog's windows; the defaults are the controller's (``reprofleet.config``)."""

    silence_s: float = DEFAULT_TIMINGS.silence_s  # a wedge needs at least this much stream silence
    probe_after_s: float = DEFAULT_TIMINGS.probe_after_s  # stream silence before probing starts (the host is a suspect)
    probe_interval_s: float = DEFAULT_TIMINGS.probe_interval_s  # a new round this often, whatever earlier rounds do
    probe_timeout_s: float = DEFAULT_TIMINGS.probe_timeout_s  # a round with no answer by then is DEAD
    dead_rounds: int = 3  # K: the last K rounds all DEAD
    userspace_s: float = DEFAULT_TIMINGS.userspace_s  # KERNEL without SSHD this long is a userspace wedge
    fleet_window_s: float = DEFAULT_TIMINGS.fleet_window_s  # hosts silent within this of each other: correlated
    correlated_hold_s: float = DEFAULT_TIMINGS.correlated_hold_s  # a correlated silence is held this long at most
    pause_cap_s: float = DEFAULT_TIMINGS.pause_cap_s  # our network down this long: the attempt ends as infra
    confirm_s: float = DEFAULT_TIMINGS.confirm_s  # between attempts: probes all failing this long = unreachable

    @classmethod
    def from_timings(cls, timings: Timings, dead_rounds: int = 3) -> "WatchdogSettings":
        return cls(silence_s=timings.silence_s, probe_after_s=timings.probe_after_s,
                   probe_interval_s=timings.probe_interval_s, probe_timeout_s=timings.probe_timeout_s,
                   dead_rounds=dead_rounds, userspace_s=timings.userspace_s, fleet_window_s=timings.fleet_window_s,
                   correlated_hold_s=timings.correlated_hold_s,
                   pause_cap_s=timings.pause_cap_s, confirm_s=timings.confirm_s)


@unique
class Verdict(str, Enum):
    LIVE = "live"
    SUSPECT = "suspect"  # silent, probes under way
    ALIVE_BUT_DETACHED = "reattach"  # silent stream, but sshd answers: re-attach
    WEDGED = "wedged"
    CONTROLLER_NETWORK = "controller_network"  # the guard says our own network is down
    HELD = "held"  # silent with other hosts and nothing on their side answers: no verdict yet


@unique
class WedgeKind(str, Enum):
    FROZEN = "frozen"  # nothing answers: no echo, no handshake, no banner
    USERSPACE = "userspace"  # the kernel answers, sshd never does


Report = Callable[..., None]  # report(host, event, **fields) -> an event in the campaign log


class NetworkGuard(Protocol):
    def __call__(self) -> bool: ...


class FleetLiveness:
    """Shared by the hosts of one campaign: who is silent since when, who was heard when, the
    partition guard, and the correlated-silence hold (:mod:`silence_hold`).

    A host's silence lasts until it is heard again (a stream line, a connection), not until
    its attempt ends: a host whose attempt ended while its switch was down is still silent,
    and still holds its peers.

    It also keeps when each host answered lately (a stream line, a probe round that got its
    kernel or sshd), so a DEAD round of one host taken while a host of its segment answered
    counts as that host's own silence (:mod:`peer_evidence`). ``peer_evidence=False`` is the
    rule before issue 32 item 15 (a hold's rounds all thrown away on its release): the
    baseline ``bench/lone_freeze.py`` measures beside it.
    """

    def __init__(self, window_s: float, network_ok: NetworkGuard | None = None, *,
                 hold_s: float = DEFAULT_TIMINGS.correlated_hold_s, segments: Mapping[str, str] | None = None,
                 host_witnesses: Mapping[str, Sequence[str]] | None = None,
                 hosts_side: Callable[[Sequence[str]], Any] | None = None,
                 clock: Callable[[], float] = time.monotonic, peer_evidence: bool = True) -> None:
        self._window = window_s
        self.network_ok = network_ok
        self.hold_s = hold_s
        self._segments = dict(segments or {})
        self._host_witnesses = {h: tuple(w) for h, w in (host_witnesses or {}).items()}
        self._hosts_side = hosts_side  # addresses -> a NetworkCheck, or None (no fresh answer yet)
        self._clock = clock
        self._lock = threading.Lock()
        self._watched: set[str] = set()
        self._silent_since: dict[str, float] = {}
        self._heard_at: dict[str, float] = {}
        self.peer_evidence = peer_evidence
        self._answers = AnswerLog()
        self._vouched: dict[str, str] = {}  # host -> the peer that answered while its last rounds got nothing
        self.report: Report | None = None

    def report_to(self, report: Report) -> None:
        """Where suspect/probe/clear events go (the campaign's events.jsonl)."""
        self.report = report

    def watching(self, host: str, active: bool) -> None:
        with self._lock:
            (self._watched.add if active else self._watched.discard)(host)

    def silent(self, host: str, since: float) -> None:
        with self._lock:
            self._silent_since.setdefault(host, since)

    def heard(self, host: str, at: float | None = None) -> None:
        """``at``: on the caller's clock (a watchdog's, the campaign's), like every time given here."""
        with self._lock:
            self._silent_since.pop(host, None)
            self._vouched.pop(host, None)
            self._heard_at[host] = self._clock() if at is None else at
            self._answers.note(host, self._heard_at[host])

    def answered(self, host: str, at: float) -> None:
        """One of ``host``'s probe rounds got its kernel or sshd at ``at``: the segment carried packets."""
        with self._lock:
            self._answers.note(host, at)

    def peer_answered(self, host: str, since: float, until: float) -> str | None:
        """Another host of ``host``'s segment that answered between ``since`` and ``until``, or None
        (always None without ``peer_evidence``)."""
        if not self.peer_evidence:
            return None
        with self._lock:
            segment = self._segments.get(host)
            return next((h for h in self._answers.hosts() if h != host and self._segments.get(h) == segment
                         and self._answers.answered(h, since, until)), None)

    def vouch(self, host: str, peer: str | None) -> None:
        """``peer`` answered while each of ``host``'s last rounds got nothing (None: no such proof now).
        Kept until the host is heard again, so the power gate reads the proof its verdict read."""
        with self._lock:
            if peer is None:
                self._vouched.pop(host, None)
            else:
                self._vouched[host] = peer

    def network(self) -> bool | None:
        """Our own network: True up, False down, None not known yet (a check is under way).

        Without a guard, every watched host silent within one window is taken as our network.
        """
        guard = self.network_ok
        if guard is None:
            return not self.everyone_silent()
        peek = getattr(guard, "peek", None)
        if peek is None:
            return bool(guard())
        answer = peek()
        return None if answer is None else bool(answer)

    def everyone_silent(self) -> bool:
        """True when more than one host is watched and all went silent within one window."""
        with self._lock:
            if len(self._watched) < 2 or not self._watched <= self._silent_since.keys():
                return False
            times = [self._silent_since[h] for h in self._watched]
            return max(times) - min(times) <= self._window

    def hold(self, host: str, now: float | None = None) -> SilenceHold:
        """Whether ``host``'s verdict (and any power action on it) must wait: see :mod:`silence_hold`."""
        witnesses = self._host_witnesses.get(host, ())
        answer = self._hosts_side(witnesses) if witnesses and self._hosts_side is not None else None
        with self._lock:
            return judge_silence(host, self._clock() if now is None else now, dict(self._silent_since),
                                 dict(self._heard_at),
                                 self._segments, window_s=self._window, hold_s=self.hold_s,
                                 witness=None if answer is None else bool(answer), vouched_by=self._vouched.get(host))


class Watchdog:
    """One host's liveness during one attempt. Call :meth:`heard` on every stream line."""

    def __init__(
        self,
        host: str,
        probe: Probe,
        settings: WatchdogSettings,
        fleet: FleetLiveness | None = None,
        clock: Callable[[], float] = time.monotonic,
        report: Report | None = None,
    ) -> None:
        self.host = host
        self._probe = probe
        self.settings = settings
        self._fleet = fleet
        self._clock = clock
        self._report = report or (fleet.report if fleet else None)
        self.last_heard = clock()
        self.suspect_since: float | None = None
        self.wedge_kind: WedgeKind | None = None
        self._rounds: ProbeRounds | None = None
        self._next_round = 0.0
        self._seen = 0  # completed rounds already reported
        self._last_answer: ProbeAnswer | None = None
        self._kernel_only_since: float | None = None
        self._paused = False
        self._held: SilenceHold | None = None  # the hold in force, once reported
        self._trusted_from: float | None = None  # released: rounds launched before count only if a peer vouches
        self._dead_in_a_row = 0
        if fleet:
            fleet.watching(host, True)

    # -- what the follower tells us ----------------------------------------------------
    def heard(self) -> None:
        self.last_heard = self._clock()
        if self.suspect_since is not None:
            self._event(CampaignEvent.CLEAR, suspect_s=round(self.last_heard - self.suspect_since, 2),
                        rounds=self._rounds.launched if self._rounds else 0,
                        last_answer=self._last_answer.name if self._last_answer is not None else None)
            self._end_suspicion()
        if self._fleet:
            self._fleet.heard(self.host, self.last_heard)

    def restart(self) -> None:
        """After a re-attach: the host is heard from again, start afresh."""
        self.heard()

    def reattach_failed(self, reason: str) -> None:
        """A failed re-attach proves nothing: judge by fresh rounds from now on."""
        if self.suspect_since is not None:
            self._event(CampaignEvent.REATTACH_FAILED, reason=reason)
            self._fresh_rounds(self._clock())

    def close(self) -> None:
        self._end_suspicion()
        if self._fleet:
            self._fleet.watching(self.host, False)

    # -- the verdict -------------------------------------------------------------------
    def check(self) -> Verdict:
        now = self._clock()
        silent = now - self.last_heard
        if silent < self.settings.probe_after_s:
            return Verdict.LIVE
        if self.suspect_since is None:
            self._begin_suspicion(now, silent)
        self._launch_due(now)
        latest = self._collect(now)
        if silent < self.settings.silence_s:
            return Verdict.SUSPECT
        if self._userspace_dead(now):
            return self._wedged_unless_held(now, WedgeKind.USERSPACE)
        if self._last_rounds_dead():
            return self._wedged_unless_held(now, WedgeKind.FROZEN)
        if self._paused:
            self._network_back(now)
        return Verdict.ALIVE_BUT_DETACHED if latest is ProbeAnswer.SSHD else Verdict.SUSPECT

    def _wedged_unless_held(self, now: float, kind: WedgeKind) -> Verdict:
        """Our own network first (the guard), then the correlated-silence hold; only then a wedge."""
        if self._fleet is not None:
            network = self._fleet.network()
            if network is False:
                if not self._paused:
                    self._paused = True
                    self._event(CampaignEvent.GUARD, network="down", message="our own network looks down: no verdict")
                return Verdict.CONTROLLER_NETWORK
            if network is None:  # the guard's check is under way (never waited for on this thread): no change
                return Verdict.CONTROLLER_NETWORK if self._paused else Verdict.HELD if self._held else Verdict.SUSPECT
            if self._paused:  # our network is back: the host gets fresh rounds before any verdict
                self._network_back(now)
                return Verdict.SUSPECT
            if kind is WedgeKind.FROZEN:
                self._fleet.vouch(self.host, self._vouched_by())
            hold = self._fleet.hold(self.host, now)
            if hold.holding:
                if self._held is None:
                    self._held = hold
                    self._event(CampaignEvent.SILENCE_HOLD, **hold.to_json())
                return Verdict.HELD
            if self._held is not None:
                self._held = None
                self._event(CampaignEvent.SILENCE_RELEASE, **hold.to_json())
                if hold.rule not in (HoldRule.OUTLASTED, HoldRule.VOUCHED):  # the segment answers now
                    return self._released(now, kind)
        self.wedge_kind = kind
        return Verdict.WEDGED

    def _released(self, now: float, kind: WedgeKind) -> Verdict:
        """A peer or a witness answers (or the peers, heard again, are silent no more): the segment
        works *now*, and this host's rounds in the hold may have run while it did not (a switch back
        from its reboot: the first host heard released the others a moment before their own answers
        came, and they were cut). A frozen suspect keeps the DEAD rounds a peer vouched for and counts
        every round launched from now; the rest, and a userspace window, start afresh."""
        self._kernel_only_since = None
        self._dead_in_a_row = 0
        if kind is WedgeKind.USERSPACE or self._fleet is None or not self._fleet.peer_evidence:
            self._fresh_rounds(now)
            return Verdict.SUSPECT
        self._trusted_from = now
        self._next_round = min(self._next_round, now)
        if self._last_rounds_dead():
            self.wedge_kind = kind
            return Verdict.WEDGED
        return Verdict.SUSPECT

    def _network_back(self, now: float) -> None:
        self._paused = False
        self._event(CampaignEvent.GUARD, network="up")
        self._fresh_rounds(now)

    def _userspace_dead(self, now: float) -> bool:
        since = self._kernel_only_since
        return since is not None and now - since >= self.settings.userspace_s

    def _last_rounds_dead(self) -> bool:
        if self._rounds is None:
            return False
        done = self._rounds.completed()
        k = max(1, self.settings.dead_rounds)
        return len(done) >= k and all(r.answer is ProbeAnswer.DEAD and self._counts(r) for r in done[-k:])

    def _counts(self, round_: Round) -> bool:
        """A DEAD round is evidence unless a hold let go after it was launched and no peer vouches for it."""
        trusted = self._trusted_from
        return trusted is None or round_.launched >= trusted or self._voucher(round_) is not None

    def _voucher(self, round_: Round) -> str | None:
        """A host of this one's segment that answered while this round got nothing."""
        if self._fleet is None:
            return None
        since, until = dead_window(round_, self.settings.probe_timeout_s)
        return self._fleet.peer_answered(self.host, since, until)

    def _vouched_by(self) -> str | None:
        """The peer that vouches for every one of the last K rounds, or None."""
        if self._rounds is None:
            return None
        return vouched_run(self._rounds.completed(), max(1, self.settings.dead_rounds), self._voucher)

    # -- rounds ------------------------------------------------------------------------
    def _begin_suspicion(self, now: float, silent: float) -> None:
        self.suspect_since = now
        self._kernel_only_since = None
        self._event(CampaignEvent.SUSPECT, silent_s=round(silent, 2))
        if self._fleet:
            self._fleet.silent(self.host, self.last_heard)
        self._fresh_rounds(now)

    def _fresh_rounds(self, now: float) -> None:
        self._rounds = ProbeRounds(self._probe, self._clock)
        self._next_round = now
        self._seen = 0
        self._last_answer = None
        self._trusted_from = None

    def _launch_due(self, now: float) -> None:
        assert self._rounds is not None
        interval = max(0.05, self.settings.probe_interval_s)
        for _ in range(4):  # bounded catch-up after a slow check
            if now < self._next_round:
                return
            self._rounds.launch()
            self._next_round += interval
        self._next_round = now + interval

    def _collect(self, now: float) -> ProbeAnswer | None:
        """Fold newly answered rounds into the userspace window; report answer changes."""
        assert self._rounds is not None
        fresh = self._rounds.answered_since(self._seen)
        for r in fresh:
            self._dead_in_a_row = self._dead_in_a_row + 1 if r.answer is ProbeAnswer.DEAD else 0
            if r.answer is ProbeAnswer.KERNEL and self._kernel_only_since is None:
                self._kernel_only_since = r.launched
            elif r.answer in (ProbeAnswer.SSHD, ProbeAnswer.UNRESOLVED) \
                    or self._dead_in_a_row >= max(1, self.settings.dead_rounds):
                # sshd answered, nothing did, or nothing could be asked (the name did not resolve,
                # and it breaks the dead rounds too): the window starts again
                self._kernel_only_since = None
            if r.answer in (ProbeAnswer.KERNEL, ProbeAnswer.SSHD) and self._fleet is not None:
                self._fleet.answered(self.host, r.answered)  # vouches for the DEAD rounds of its segment's hosts
            if r.answer is not self._last_answer:
                self._event(CampaignEvent.PROBE, answer=r.answer.name, round=r.index,
                            silent_s=round(now - self.last_heard, 2))
            self._last_answer = r.answer
        self._seen += len(fresh)
        done = self._rounds.completed()
        return done[-1].answer if done else None

    def _end_suspicion(self) -> None:
        self._rounds = None  # threads in flight finish on their own (bounded by the timeout)
        self.suspect_since = None
        self._kernel_only_since = None
        self._last_answer = None
        self._seen = 0
        self._paused = False
        self._held = None
        self._dead_in_a_row = 0
        self._trusted_from = None

    def _event(self, what: CampaignEvent, **fields: Any) -> None:
        if self._report is not None:
            try:
                self._report(self.host, what, **fields)
            except Exception:  # the log must never take the watchdog down
                pass

    @property
    def rounds_completed(self) -> int:
        return len(self._rounds.completed()) if self._rounds else 0
