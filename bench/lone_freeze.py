"""A lone freeze among quiet peers: freeze -> declared, today's rule beside the peer-evidence rule.

No fleet: the real ``Watchdog`` and ``FleetLiveness`` (src/reprofleet/liveness/) run in virtual
time, against hosts whose behaviour is a timeline. Only the rule differs between the arms:
``FleetLiveness(peer_evidence=False)`` is today's rule before issue 32 item 15 (a correlated
hold's rounds all thrown away on its release, fresh rounds after it), ``True`` the new one (a
DEAD round taken while a host of the same segment answered is the host's own silence).

Virtual time, with the watchdog's own threads: every probe round runs in the thread
``ProbeRounds`` gives it, and blocks until the virtual clock reaches the moment its answer
would come (a host that answers: 1 ms after the launch; one that does not: the 1 s probe
timeout). The clock moves from one event to the next (a check, a heartbeat, a probe's answer,
a host changing state) only once every round thread has either answered or is waiting for its
moment, so a run is the same every time and takes no real waiting.

Each host on one segment (one switch), with the controller's shipped timings (probing after
1 s of silence, rounds every 0.5 s, 1 s timeout, 3 DEAD rounds and 3 s of silence, a 5 s
window, a 300 s hold, the partition guard saying our network is up), is followed as the
runner does: a check every 0.25 s, a heartbeat line every 0.5 s while its stream flows (a
line is ``heard`` and checked), a new watchdog (after a connect, ``heard``) per attempt.

- a *stall* (4-10 s): the stream stops; agent and sshd stopped or starved, the kernel echoes
  (its probes answer KERNEL), then the stream flows again;
- a *gap* between attempts (1-4 s): no stream and no watchdog; the next attempt's connect is
  the host heard again;
- a *userspace death*: the stream stops for good, the kernel keeps answering;
- a *freeze*: nothing answers any more (probes DEAD);
- a *switch outage*: every host's stream and probes are cut, then all come back.

ws01 freezes at 0 s in every scenario but the outages. Families (SEED-numbered scenarios, each
drawing its own offsets, durations and phases):

- ``stall+gap``: ws02 stalls (start -3..+1.5 s), ws03 is between attempts (start -2..+1 s);
- ``userspace+stall``: ws02 died in userspace 1-4 s before, ws03 stalls (start -3..+1.5 s);
- ``two stalls``: ws02 and ws03 stall (each start -3..+1.5 s);
- ``reboot+gap``: ws02 reset itself (nothing answers for 20-40 s, start -3..+1 s), ws03 is
  between attempts (2-8 s, start -2..+1 s): no peer answers until ws03's next connect, so
  this is the release path (ws02's own wedge is a true one, not counted false);
- ``no peer quiet``: the lone-freeze path, for reference;
- ``outage``: every host alive, their switch down 20-50 s from 0 s (a false wedge is any);
- ``outage after a stall``: the same, ws02 stalled (its kernel answering) from -3 s until the
  switch comes back: answers that stop when the switch goes down vouch for nothing after.

The goal (issue 32 item 15): a lone freeze among quiet peers declared within the lone-freeze
budget, <= 4 s median over the three families with 4-10 s stalls; no false wedge anywhere.

    .venv/bin/python bench/lone_freeze.py --scenarios 200 --results bench/RESULTS.md
    .venv/bin/python bench/lone_freeze.py --scenarios 10            # a quick look, nothing written
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import date
from enum import Enum
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import rewrite_section  # noqa: E402

from reprofleet.config import DEFAULT_TIMINGS  # noqa: E402
from reprofleet.liveness.probes import ProbeAnswer  # noqa: E402
from reprofleet.liveness.watchdog import FleetLiveness, Verdict, Watchdog, WatchdogSettings  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SETTINGS = WatchdogSettings.from_timings(DEFAULT_TIMINGS)
RTT_S = 0.001
CHECK_S = DEFAULT_TIMINGS.stream_read_s  # the follower checks at least this often
HEARTBEAT_S = 0.5
START_S = -20.0
HORIZON_S = 60.0  # after the freeze (or the outage's end): not declared by then is "never"
GOAL_S = 4.0
HOSTS = ("ws01", "ws02", "ws03")
QUIET = ("stall+gap", "userspace+stall", "two stalls")
FAMILIES = (*QUIET, "reboot+gap", "no peer quiet", "outage", "outage after a stall")
RULES = ("today", "peer evidence")
POOLED = "quiet-peer scenarios with stalls (the first three)"


class State(str, Enum):
    RUNNING = "running"  # streaming; probes would get sshd
    STALL = "stall"  # no stream, the kernel answers
    GAP = "gap"  # between attempts: no stream, no watchdog
    USERSPACE = "userspace"  # no stream ever again, the kernel answers
    FROZEN = "frozen"  # nothing answers
    REBOOTING = "rebooting"  # reset itself: nothing answers until its boot is up, then it streams again


SILENT_FOR_REAL = (State.FROZEN, State.REBOOTING)  # a wedge declared on these is no false one


@dataclass
class Timeline:
    """One host: from each time on, its state (the last entry at or before t)."""

    changes: list[tuple[float, State]] = field(default_factory=lambda: [(START_S, State.RUNNING)])

    def at(self, t: float) -> State:
        state = State.RUNNING
        for when, what in self.changes:
            if when <= t:
                state = what
        return state

    def then(self, start: float, state: State, end: float | None = None) -> "Timeline":
        self.changes.append((start, state))
        if end is not None:
            self.changes.append((end, State.RUNNING))
        self.changes.sort(key=lambda c: c[0])
        return self


@dataclass(frozen=True)
class Scenario:
    family: str
    seed: int
    hosts: dict[str, Timeline]
    outage: tuple[float, float] | None  # the switch down from, to
    frozen: str | None  # the host that froze at 0 s


def draw(family: str, seed: int) -> Scenario:
    rng = random.Random(f"{family}/{seed}")
    hosts = {h: Timeline() for h in HOSTS}

    def stall(host: str, earliest: float = -3.0, latest: float = 1.5) -> None:
        start = rng.uniform(earliest, latest)
        hosts[host].then(start, State.STALL, start + rng.uniform(4.0, 10.0))

    outage = None
    if family == "stall+gap":
        stall("ws02")
        start = rng.uniform(-2.0, 1.0)
        hosts["ws03"].then(start, State.GAP, start + rng.uniform(1.0, 4.0))
    elif family == "userspace+stall":
        hosts["ws02"].then(-rng.uniform(1.0, 4.0), State.USERSPACE)
        stall("ws03")
    elif family == "two stalls":
        stall("ws02")
        stall("ws03")
    elif family == "reboot+gap":
        start = rng.uniform(-3.0, 1.0)
        hosts["ws02"].then(start, State.REBOOTING, start + rng.uniform(20.0, 40.0))
        start = rng.uniform(-2.0, 1.0)
        hosts["ws03"].then(start, State.GAP, start + rng.uniform(2.0, 8.0))
    elif family.startswith("outage"):
        outage = (0.0, rng.uniform(20.0, 50.0))
        if family == "outage after a stall":
            hosts["ws02"].then(-3.0, State.STALL, outage[1])
    if not family.startswith("outage"):
        hosts["ws01"].then(0.0, State.FROZEN)
    return Scenario(family, seed, hosts, outage, None if outage else "ws01")


class VirtualNet:
    """The virtual clock, and every probe round waiting for its answer's moment."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.now = START_S
        self._cond = threading.Condition()
        self._waiting: list[tuple[float, int, threading.Event, threading.Thread]] = []
        self._count = 0

    def clock(self) -> float:
        return self.now

    def down(self, t: float) -> bool:
        outage = self.scenario.outage
        return outage is not None and outage[0] <= t < outage[1]

    def streaming(self, host: str, t: float) -> bool:
        return not self.down(t) and self.scenario.hosts[host].at(t) is State.RUNNING

    def answer(self, host: str, t: float) -> ProbeAnswer:
        state = self.scenario.hosts[host].at(t)
        if self.down(t) or state in SILENT_FOR_REAL:
            return ProbeAnswer.DEAD
        return ProbeAnswer.KERNEL if state in (State.STALL, State.USERSPACE) else ProbeAnswer.SSHD

    def probe(self, host: str) -> Callable[[], ProbeAnswer]:
        def ask() -> ProbeAnswer:  # in the round's own thread
            answer = self.answer(host, self.now)
            due = self.now + (SETTINGS.probe_timeout_s if answer is ProbeAnswer.DEAD else RTT_S)
            answered = threading.Event()
            with self._cond:
                self._count += 1
                heapq.heappush(self._waiting, (due, self._count, answered, threading.current_thread()))
                self._cond.notify_all()
            answered.wait(30.0)
            return answer
        return ask

    def next_answer(self) -> float | None:
        with self._cond:
            return self._waiting[0][0] if self._waiting else None

    def advance(self, t: float) -> None:
        """Time moves to ``t``: every round due by then answers (and has recorded its answer)."""
        self.now = t
        while True:
            with self._cond:
                if not self._waiting or self._waiting[0][0] > t:
                    return
                _, _, answered, thread = heapq.heappop(self._waiting)
            answered.set()
            thread.join(30.0)

    def settle(self) -> None:
        """Every round thread launched so far is waiting for its moment (none is still asking)."""
        deadline = time.monotonic() + 30.0
        with self._cond:
            while time.monotonic() < deadline:
                rounds = sum(1 for t in threading.enumerate() if t.name == "liveness-round")
                if rounds <= len(self._waiting):
                    return
                self._cond.wait(0.0005)
        raise RuntimeError("a probe round never asked its host")


@dataclass
class Outcome:
    family: str
    seed: int
    rule: str
    declared_s: float | None  # the frozen host's freeze -> WEDGED
    held: bool  # ws01 (frozen, or alive behind the switch in an outage) was held at least once
    false_wedges: list[str]


def run(scenario: Scenario, rule: str) -> Outcome:
    net = VirtualNet(scenario)
    fleet = FleetLiveness(SETTINGS.fleet_window_s, lambda: True, hold_s=SETTINGS.correlated_hold_s,
                          segments={h: "rack1" for h in HOSTS}, clock=net.clock,
                          peer_evidence=rule == "peer evidence")
    rng = random.Random(f"phases/{scenario.family}/{scenario.seed}")
    dogs: dict[str, Watchdog | None] = {h: Watchdog(h, net.probe(h), SETTINGS, fleet, clock=net.clock) for h in HOSTS}
    queue: list[tuple[float, int, str, str]] = []
    for n, host in enumerate(HOSTS):
        heapq.heappush(queue, (START_S + round(rng.uniform(0, CHECK_S), 2), n, "check", host))
        heapq.heappush(queue, (START_S + round(rng.uniform(0, HEARTBEAT_S), 2), n, "line", host))
        for when, _ in scenario.hosts[host].changes[1:]:
            heapq.heappush(queue, (when, n, "change", host))
    end = (scenario.outage[1] if scenario.outage else 0.0) + HORIZON_S
    declared: float | None = None
    held, false_wedges = False, []
    while queue:
        due = net.next_answer()
        t = min(queue[0][0], due) if due is not None else queue[0][0]
        if t > end:
            break
        net.advance(t)
        net.settle()
        if due is not None and due < queue[0][0]:
            continue
        when, n, what, host = heapq.heappop(queue)
        dog = dogs[host]
        if what == "change":
            dog = _attempt_boundary(net, fleet, dogs, host, when)
            continue
        if what == "line":
            heapq.heappush(queue, (when + HEARTBEAT_S, n, "line", host))
            if dog is None or not net.streaming(host, when):
                continue
            dog.heard()
        else:
            heapq.heappush(queue, (when + CHECK_S, n, "check", host))
            if dog is None:
                continue
        verdict = dog.check()
        net.settle()
        held = held or (host == HOSTS[0] and verdict is Verdict.HELD)
        if verdict is Verdict.WEDGED:
            dog.close()
            dogs[host] = None
            if host == scenario.frozen:
                declared = when
                break
            if scenario.hosts[host].at(when) not in SILENT_FOR_REAL:
                false_wedges.append(f"{host}@{when:.2f}")
    for dog in dogs.values():
        if dog is not None:
            dog.close()
    net.advance(float("inf"))  # every round still waiting answers: no thread outlives the scenario
    return Outcome(scenario.family, scenario.seed, rule, declared, held, false_wedges)


def _attempt_boundary(net: VirtualNet, fleet: FleetLiveness, dogs: dict[str, Watchdog | None], host: str,
                      when: float) -> Watchdog | None:
    """A gap between attempts begins (the attempt's watchdog is closed) or ends (a connect: the host
    is heard, and the next attempt has a watchdog of its own)."""
    state, dog = net.scenario.hosts[host].at(when), dogs[host]
    if state is State.GAP and dog is not None:
        dog.close()
        dogs[host] = None
    elif state is not State.GAP and dog is None:
        fleet.heard(host, when)
        dogs[host] = Watchdog(host, net.probe(host), SETTINGS, fleet, clock=net.clock)
    return dogs[host]


# -- the numbers -----------------------------------------------------------------------------

def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


@dataclass(frozen=True)
class Summary:
    """One arm over some scenarios: freeze -> declared where it was, and what else happened."""

    scenarios: int
    median_s: float | None
    p90_s: float | None
    max_s: float | None
    never: int  # the frozen host (or none, in an outage) not declared within the horizon
    held: int
    false_wedges: int


def summary(outcomes: list[Outcome]) -> Summary:
    found = [o.declared_s for o in outcomes if o.declared_s is not None]
    return Summary(len(outcomes), round(statistics.median(found), 2) if found else None,
                   round(percentile(found, 0.9), 2) if found else None, round(max(found), 2) if found else None,
                   sum(1 for o in outcomes if o.declared_s is None), sum(1 for o in outcomes if o.held),
                   sum(len(o.false_wedges) for o in outcomes))


Results = dict[str, dict[str, Summary]]  # family (or the pooled quiet-peer scenarios) -> rule -> numbers


def table(results: Results) -> str:
    def cell(s: Summary) -> str:
        if s.median_s is None:
            return f"none declared (held {s.held})"
        return f"{s.median_s} / {s.p90_s} s (max {s.max_s}; held {s.held})"

    lines = ["| scenarios | n | today's rule: median / p90 | peer evidence: median / p90 | false wedges (today / new) |",
             "| --- | ---: | --- | --- | --- |"]
    for family, by_rule in results.items():
        today, new = by_rule["today"], by_rule["peer evidence"]
        lines.append(f"| {family} | {today.scenarios} | {cell(today)} | {cell(new)} | "
                     f"{today.false_wedges} / {new.false_wedges} |")
    return "\n".join(lines)


def goal(results: Results) -> str:
    pooled = results[POOLED]
    new, today = pooled["peer evidence"].median_s, pooled["today"].median_s
    false = sum(r[rule].false_wedges for f, r in results.items() if f in FAMILIES for rule in RULES)
    ok = new is not None and new <= GOAL_S and false == 0
    return (f"Goal (median <= {GOAL_S:g} s over the {POOLED}, no false wedge): "
            f"{'PASS' if ok else 'FAIL'}: peer evidence {new} s, today's rule {today} s; {false} false wedges.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", type=int, default=200, help="seeded scenarios per family")
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--json", type=Path, default=Path(__file__).with_name("lone-freeze-results.json"))
    parser.add_argument("--results", type=Path, default=None, help="rewrite this RESULTS.md's lone-freeze section")
    args = parser.parse_args()
    began = time.monotonic()
    outcomes: dict[str, dict[str, list[Outcome]]] = {}
    for family in args.families:
        outcomes[family] = {rule: [] for rule in RULES}
        for seed in range(1, args.scenarios + 1):
            scenario = draw(family, seed)
            for rule in RULES:
                outcomes[family][rule].append(run(scenario, rule))
        print(family, {r: summary(o) for r, o in outcomes[family].items()}, flush=True)
    results: Results = {f: {r: summary(o) for r, o in by_rule.items()} for f, by_rule in outcomes.items()}
    quiet = [f for f in QUIET if f in outcomes]
    if quiet:
        results[POOLED] = {r: summary([o for f in quiet for o in outcomes[f][r]]) for r in RULES}
    elapsed = time.monotonic() - began
    print(table(results))
    if quiet:
        print(goal(results))
    if args.results is None:
        return
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "src", "bench/lone_freeze.py"], capture_output=True,
                           text=True, cwd=REPO).stdout.strip()
    wedges = {f"{f}/{r}": [w for o in os for w in o.false_wedges] for f, by in outcomes.items() for r, os in by.items()}
    args.json.write_text(json.dumps({"commit": commit, "dirty": bool(dirty), "seconds": round(elapsed, 1),
                                     "results": {f: {r: asdict(s) for r, s in by.items()} for f, by in results.items()},
                                     "false_wedges": wedges}, indent=2) + "\n")
    rewrite_section(args.results, "lone-freeze", "A lone freeze among quiet peers: today's rule beside peer evidence "
                    "(bench/lone_freeze.py)", body(args, results, commit, bool(dirty), elapsed))


def body(args: argparse.Namespace, results: Results, commit: str, dirty: bool,
         elapsed: float) -> str:
    families = "" if list(args.families) == list(FAMILIES) else " --families " + " ".join(f"'{f}'" for f in args.families)
    return "\n\n".join([
        f"Command: `.venv/bin/python bench/lone_freeze.py --scenarios {args.scenarios}{families} --results "
        f"bench/RESULTS.md` (commit {commit}{' with local changes' if dirty else ''}, {date.today().isoformat()}, "
        f"{elapsed:.0f} s, one process, 2-core VM shared with other sessions' tests; JSON in "
        f"bench/lone-freeze-results.json).",
        "The real `Watchdog` and `FleetLiveness` in virtual time (each probe round in its own thread, answering "
        "at the moment it would: 1 ms, or DEAD at the 1 s timeout), three hosts on one switch, shipped timings "
        "(rounds every 0.5 s, 3 DEAD rounds and 3 s of silence, a 5 s window, a 300 s hold), a check every "
        "0.25 s and a heartbeat every 0.5 s per host. ws01 freezes at 0 s; latency is from the freeze to the "
        "verdict. Stalls last 4-10 s (the kernel answers, agent and sshd do not), gaps between attempts 1-4 s. "
        "'today's rule' is `FleetLiveness(peer_evidence=False)`: the code path before issue 32 item 15. "
        "'held': scenarios in which ws01 was held as correlated at least once. The outages have no frozen host "
        "(ws01 too is alive behind the switch): every wedge there is false.",
        table(results),
        goal(results) if POOLED in results else "",
        "Where ws01 was never held (a peer's stream or its next connect was heard after ws01 fell silent) both "
        "rules take the lone-freeze path and agree; the rules differ on the held scenarios. With stalls, the "
        "stalled peer's kernel answers its own probes all along, so ws01's DEAD rounds are vouched for and the "
        "hold lets go at the first verdict (rule `vouched`); today's rule waited for a stall to end (or the "
        "userspace-dead peer's partner to speak), then for three fresh rounds. In reboot+gap nothing answers "
        "until ws03's connect, so both rules wait for it; peer evidence then counts the rounds in flight at that "
        "moment instead of starting afresh (the release path). The outages vouch for nothing: ws01 held in "
        "every one, under both rules, and nothing declared.",
    ])


if __name__ == "__main__":
    main()
