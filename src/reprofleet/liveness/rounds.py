"""Rounds of probes of one suspect: launched on a steady grid, each in its own thread.

A round never waits for an earlier one's timeout, so a frozen host's answers (all DEAD)
arrive on a steady grid; a probe thread that outlives its timeout never piles up more than
``MAX_ROUNDS_IN_FLIGHT``. Each round keeps when it was launched and when it answered: a DEAD
round is a window of time in which the host was asked and said nothing, and what else was
heard in that window (:mod:`peer_evidence`) tells whose silence it was.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Protocol

from reprofleet.liveness.probes import ProbeAnswer

MAX_ROUNDS_IN_FLIGHT = 8  # a probe thread that outlives its timeout never piles up more


class Probe(Protocol):
    def __call__(self) -> ProbeAnswer | bool: ...


def _as_answer(value: ProbeAnswer | bool) -> ProbeAnswer:
    """Plain bool probes (True = alive) read as SSHD/DEAD."""
    if isinstance(value, ProbeAnswer):
        return value
    return ProbeAnswer.SSHD if value else ProbeAnswer.DEAD


@dataclass(frozen=True)
class Round:
    index: int
    launched: float
    answer: ProbeAnswer
    answered: float  # when the probe returned (a DEAD one: when it gave up), on the same clock


class ProbeRounds:
    """Launches one probe per round in its own thread; collects answers as they come."""

    def __init__(self, probe: Probe, clock: Callable[[], float]) -> None:
        self._probe = probe
        self._clock = clock
        self._lock = threading.Lock()
        self._done: list[Round] = []
        self._in_flight = 0
        self.launched = 0

    def launch(self) -> None:
        with self._lock:
            if self._in_flight >= MAX_ROUNDS_IN_FLIGHT:
                return
            self._in_flight += 1
            index, self.launched = self.launched, self.launched + 1
        started = self._clock()
        threading.Thread(target=self._run, args=(index, started), daemon=True, name="liveness-round").start()

    def _run(self, index: int, started: float) -> None:
        try:
            answer = _as_answer(self._probe())
        except Exception:  # a probe that raises saw nothing answer
            answer = ProbeAnswer.DEAD
        answered = self._clock()
        with self._lock:
            self._in_flight -= 1
            self._done.append(Round(index, started, answer, answered))

    def completed(self) -> list[Round]:
        """Every answered round so far, in launch order."""
        with self._lock:
            return sorted(self._done, key=lambda r: r.index)

    def answered_since(self, count: int) -> list[Round]:
        """Rounds answered after the first ``count`` answers, in the order they answered."""
        with self._lock:
            return self._done[count:]
