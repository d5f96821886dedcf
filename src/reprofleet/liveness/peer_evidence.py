"""Whose silence is a DEAD round: the host's, or its segment's?

The correlated-silence hold (:mod:`silence_hold`) exists because a switch outage silences
every host behind it at once, which from here looks like hosts freezing together. But hosts of
one segment also go quiet for their own reasons while the segment works: a stall of a few
seconds (agent and sshd starved or stopped, the kernel still echoing), a gap between attempts,
a userspace death. A host that froze among such quiet peers was held as correlated, and its
rounds taken in the hold were thrown away on the release: declared 6-7.5 s after it froze
instead of ~3.5 s (issue 32 item 15).

A DEAD round is a window of time: from its launch until it gave up (at least the probe's
timeout), the host was asked and said nothing. If another host of the same segment *answered*
inside that window (a line of its stream, or one of its own probe rounds got its kernel's echo
or its sshd's banner), the segment carried packets then: the silence was this host's. Such a
round is *vouched for* by that peer, and is evidence whatever the hold says:

- the last K rounds all DEAD, every one vouched for: the hold lets the host go at once (rule
  ``vouched``);
- a release by a peer or a witness drops the rounds of the hold no peer vouched for (they may
  have run while the switch was down) and keeps the vouched ones; rounds launched after the
  release count as before.

A switch outage vouches for nothing: every host behind it is silent, streams and probes alike,
so the hold stays. When the switch comes back, only the rounds in flight at that moment can be
vouched for (two, with rounds every 0.5 s and a 1 s timeout), fewer than K = 3, and the host's
own answer comes on the next one.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Callable, Sequence

from reprofleet.liveness.probes import ProbeAnswer
from reprofleet.liveness.rounds import Round

ANSWER_MEMORY_S = 60.0  # answers older than this (behind the newest of the host) are forgotten
MERGE_S = 0.05  # an answer this close to one already kept adds nothing (a chatty stream stays small)


class AnswerLog:
    """When each host answered lately. Not locked: its owner (``FleetLiveness``) holds the lock."""

    def __init__(self, memory_s: float = ANSWER_MEMORY_S, merge_s: float = MERGE_S) -> None:
        self._memory = memory_s
        self._merge = merge_s
        self._times: dict[str, list[float]] = {}

    def note(self, host: str, at: float) -> None:
        """``host`` answered at ``at`` (answers may come out of order: each thread collects its own)."""
        times = self._times.setdefault(host, [])
        i = bisect_left(times, at)
        if (i < len(times) and times[i] - at <= self._merge) or (i > 0 and at - times[i - 1] <= self._merge):
            return
        times.insert(i, at)
        if times[0] < times[-1] - self._memory:
            del times[:bisect_left(times, times[-1] - self._memory)]

    def answered(self, host: str, since: float, until: float) -> bool:
        """An answer at or after ``since`` and before ``until`` (a round that gave up at ``until``
        never saw what came at that instant)."""
        times = self._times.get(host, [])
        i = bisect_left(times, since)
        return i < len(times) and times[i] < until

    def hosts(self) -> list[str]:
        return sorted(self._times)


def dead_window(round_: Round, timeout_s: float) -> tuple[float, float]:
    """When the host was asked and said nothing: from the launch until the round gave up, and at
    least the probe's timeout (an early error, or a fake probe, gives up sooner)."""
    return round_.launched, max(round_.answered, round_.launched + timeout_s)


def vouched_run(rounds: Sequence[Round], k: int, voucher: Callable[[Round], str | None]) -> str | None:
    """The peer that vouches for the last ``k`` rounds (all DEAD, each with a peer's answer in its
    window; the latest round's voucher is named), or None."""
    last = list(rounds[-k:]) if k > 0 else []
    if len(last) < k or not last or any(r.answer is not ProbeAnswer.DEAD for r in last):
        return None
    names = [voucher(r) for r in last]
    return names[-1] if all(names) else None
