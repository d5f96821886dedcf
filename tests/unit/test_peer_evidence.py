"""A DEAD round taken while a host of the same segment answered is the host's own silence
(issue 32 item 15): a lone freeze among quiet peers is declared on it, a switch outage is not."""

from __future__ import annotations

from reprofleet.liveness.peer_evidence import AnswerLog, dead_window, vouched_run
from reprofleet.liveness.probes import ProbeAnswer
from reprofleet.liveness.rounds import Round
from reprofleet.liveness.silence_hold import HoldRule
from reprofleet.liveness.watchdog import FleetLiveness, Verdict
from tests.support.watchdogs import Events, FakeClock, settle, tick, together

RACK = {"ws01": "rack1", "ws02": "rack1", "ws03": "rack1"}


def _fleet(clock: FakeClock, segments: dict[str, str] = RACK, peer_evidence: bool = True) -> FleetLiveness:
    return FleetLiveness(window_s=5.0, network_ok=lambda: True, hold_s=300.0, clock=clock, segments=segments,
                         peer_evidence=peer_evidence)


def test_a_lone_freeze_beside_a_stalled_peer_is_declared_on_the_rounds_the_peers_kernel_vouches_for() -> None:
    """ws01 freezes while ws02 stalls (agent and sshd stopped, its kernel still echoes): silent
    together, so today's rule held ws01 until ws02's stream spoke again. ws02's own probes answer
    all along, so the segment works and ws01's DEAD rounds are ws01's: declared on the lone-freeze
    path. ws02 is never declared (a kernel that answers has the userspace window)."""
    clock, events = FakeClock(), Events()
    fleet = _fleet(clock)
    (frozen,) = together(fleet, clock, ["ws01"], events=events)
    (stalled,) = together(fleet, clock, ["ws02"], answer=lambda: ProbeAnswer.KERNEL)
    assert tick([frozen, stalled], clock, 3.5) == [Verdict.WEDGED, Verdict.SUSPECT]
    assert {f["rule"] for _, what, f in events.seen if what == "silence_release"} <= {"vouched"}
    assert tick([stalled], clock, 6.0) == [Verdict.SUSPECT]


def test_the_same_freeze_was_held_until_the_stall_ended_without_peer_evidence() -> None:
    clock = FakeClock()
    fleet = _fleet(clock, peer_evidence=False)
    (frozen,) = together(fleet, clock, ["ws01"])
    (stalled,) = together(fleet, clock, ["ws02"], answer=lambda: ProbeAnswer.KERNEL)
    assert tick([frozen, stalled], clock, 8.0) == [Verdict.HELD, Verdict.SUSPECT]


def test_a_switch_outage_vouches_for_nothing_and_the_hold_stays() -> None:
    """Every host behind the switch is silent, streams and probes alike: no round is vouched for."""
    clock = FakeClock()
    dogs = together(_fleet(clock), clock, ["ws01", "ws02", "ws03"])
    assert tick(dogs, clock, 30.0) == [Verdict.HELD] * 3


def test_a_host_answering_on_another_segment_vouches_for_nothing() -> None:
    clock = FakeClock()
    fleet = _fleet(clock, segments={"ws01": "rack1", "ws02": "rack1", "ws03": "rack2"})
    frozen = together(fleet, clock, ["ws01", "ws02"])
    (elsewhere,) = together(fleet, clock, ["ws03"], answer=lambda: ProbeAnswer.KERNEL)
    assert tick(frozen + [elsewhere], clock, 10.0) == [Verdict.HELD, Verdict.HELD, Verdict.SUSPECT]


def test_a_release_keeps_the_dead_rounds_a_peers_answer_vouches_for_and_drops_the_rest() -> None:
    """ws01 and ws02 fall silent together and nothing answers: held. ws02's stream speaks again.
    ws01's rounds in flight then (launched less than a probe timeout before) saw ws02 answer and
    count; the round before them ran while nothing answered and does not; the round launched at
    the release completes the confirm window. (Today's rule threw them all away and waited for
    three fresh rounds.)"""
    clock, events = FakeClock(), Events()
    fleet = _fleet(clock)
    (frozen,), (peer,) = together(fleet, clock, ["ws01"], events=events), together(fleet, clock, ["ws02"])
    assert tick([frozen, peer], clock, 10.0) == [Verdict.HELD] * 2  # rounds every 0.5 s, the last at 10 s
    clock.now += 0.25
    peer.heard()
    assert frozen.check() is Verdict.SUSPECT  # released; the round at 9.0 s saw nothing answer: not evidence
    assert [f["rule"] for _, what, f in events.seen if what == "silence_release"] == ["lone"]  # ws02 is not silent
    settle(frozen)
    assert frozen.check() is Verdict.WEDGED  # 9.5 s and 10 s (vouched for by ws02) and the one at the release


def test_the_power_gate_reads_the_proof_the_verdict_read_until_the_host_is_heard() -> None:
    clock = FakeClock()
    fleet = _fleet(clock)
    (frozen,) = together(fleet, clock, ["ws01"])
    (stalled,) = together(fleet, clock, ["ws02"], answer=lambda: ProbeAnswer.KERNEL)
    assert tick([frozen, stalled], clock, 3.5)[0] is Verdict.WEDGED
    frozen.close()  # the attempt ends; recovery asks the hold before it cuts power
    hold = fleet.hold("ws01", clock.now)
    assert not hold.holding and hold.rule is HoldRule.VOUCHED and "ws02" in hold.why
    fleet.heard("ws01", clock.now)  # back from its cycle: the proof was about that silence only
    fleet.silent("ws01", clock.now)
    assert fleet.hold("ws01", clock.now).rule is not HoldRule.VOUCHED


# -- the pieces ---------------------------------------------------------------------------

def test_an_answer_vouches_for_a_round_from_its_launch_until_it_gave_up_not_at_that_instant() -> None:
    log = AnswerLog()
    log.note("ws02", 12.0)
    log.note("ws02", 10.5)  # collected later by another thread
    dead = Round(0, 10.2, ProbeAnswer.DEAD, 10.2)  # a probe that gave up at once still had its timeout
    assert dead_window(dead, 1.0) == (10.2, 11.2)
    assert log.answered("ws02", *dead_window(dead, 1.0))
    assert not log.answered("ws02", 11.0, 12.0)  # a round that gave up at 12.0 never saw what came then
    assert not log.answered("ws03", 0.0, 100.0)


def test_a_run_is_vouched_for_only_when_each_of_the_last_k_rounds_is_dead_and_vouched_for() -> None:
    rounds = [Round(i, float(i), ProbeAnswer.DEAD, float(i) + 1) for i in range(4)]
    assert vouched_run(rounds, 3, lambda r: "ws02") == "ws02"
    assert vouched_run(rounds, 3, lambda r: None if r.index == 1 else "ws02") is None
    assert vouched_run(rounds[:2], 3, lambda r: "ws02") is None
    answered = rounds[:3] + [Round(3, 3.0, ProbeAnswer.KERNEL, 3.0)]
    assert vouched_run(answered, 3, lambda r: "ws02") is None
