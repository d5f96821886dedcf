"""Silence makes a suspect; rounds of three-answer probes (DEAD/KERNEL/SSHD) make the verdict."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pytest

from reprofleet.liveness.probes import ProbeAnswer
from reprofleet.power import PowerLog
from reprofleet.liveness.watchdog import FleetLiveness, Verdict, Watchdog, WatchdogSettings, WedgeKind
from tests.support.watchdogs import SETTINGS, Events, FakeClock, advance, make, settle, tick, together


def test_a_host_that_keeps_streaming_is_live_and_never_probed() -> None:
    probes: list[int] = []
    dog, clock, events = make(lambda: probes.append(1) or ProbeAnswer.DEAD)
    for _ in range(20):
        clock.now += 0.5
        dog.heard()
        assert dog.check() is Verdict.LIVE
    assert probes == [] and events.seen == []


def test_probing_starts_after_a_second_of_silence_not_before() -> None:
    dog, clock, events = make(lambda: ProbeAnswer.SSHD)
    assert advance(dog, clock, 0.75) is Verdict.LIVE
    assert events.names() == []
    assert advance(dog, clock, 0.5) is Verdict.SUSPECT
    assert events.names()[:2] == ["suspect", "probe"]
    assert events.seen[1][2]["answer"] == "SSHD"


def test_a_frozen_host_is_declared_at_three_seconds_of_silence_once_k_rounds_are_dead() -> None:
    dog, clock, events = make(lambda: ProbeAnswer.DEAD)
    assert advance(dog, clock, 2.75) is Verdict.SUSPECT  # K dead rounds already, but silence < 3 s
    assert dog.rounds_completed >= 3
    assert advance(dog, clock, 0.25) is Verdict.WEDGED
    assert dog.wedge_kind is WedgeKind.FROZEN
    assert events.names() == ["suspect", "probe"]


def test_fewer_than_k_dead_rounds_after_a_live_answer_are_not_a_wedge() -> None:
    answers = iter([ProbeAnswer.SSHD] * 5 + [ProbeAnswer.DEAD] * 100)
    dog, clock, _ = make(lambda: next(answers))
    assert advance(dog, clock, 3.0) is Verdict.ALIVE_BUT_DETACHED  # rounds at 1.0 .. 3.0 s: 5 SSHD
    assert advance(dog, clock, 1.0) is Verdict.SUSPECT  # rounds at 3.5 and 4.0 s: 2 DEAD of K=3
    assert advance(dog, clock, 0.5) is Verdict.WEDGED  # the third


def test_a_suspect_that_answered_once_and_then_went_dead_is_a_wedge() -> None:
    answers = iter([ProbeAnswer.SSHD] * 2 + [ProbeAnswer.DEAD] * 100)
    dog, clock, events = make(lambda: next(answers))
    assert advance(dog, clock, 1.5) is Verdict.SUSPECT
    assert advance(dog, clock, 2.0) is Verdict.WEDGED
    assert [f["answer"] for _, what, f in events.seen if what == "probe"] == ["SSHD", "DEAD"]


def test_rounds_whose_name_did_not_resolve_never_make_a_wedge_and_break_a_dead_run() -> None:
    """A DNS outage or a DHCP move in a silence says nothing of the host: no verdict rests on it."""
    answers = iter([ProbeAnswer.DEAD, ProbeAnswer.DEAD] + [ProbeAnswer.UNRESOLVED] * 20 + [ProbeAnswer.DEAD] * 100)
    dog, clock, events = make(lambda: next(answers))
    assert advance(dog, clock, 10.0) is Verdict.SUSPECT  # 2 DEAD, then 16 rounds that could not ask: never K dead
    assert [f["answer"] for _, what, f in events.seen if what == "probe"] == ["DEAD", "UNRESOLVED"]
    assert advance(dog, clock, 3.0) is Verdict.WEDGED  # the name resolves again and K rounds are dead
    assert dog.wedge_kind is WedgeKind.FROZEN


def test_an_unresolved_round_restarts_the_userspace_window() -> None:
    answers = iter([ProbeAnswer.KERNEL] * 10 + [ProbeAnswer.UNRESOLVED] + [ProbeAnswer.KERNEL] * 100)
    dog, clock, _ = make(lambda: next(answers), settings=WatchdogSettings(userspace_s=10.0))
    assert advance(dog, clock, 10.5) is Verdict.SUSPECT  # 10 s of kernel-only, but one round could not ask
    assert advance(dog, clock, 1.0) is Verdict.SUSPECT  # the window started again at 6.5 s
    assert advance(dog, clock, 5.5) is Verdict.WEDGED and dog.wedge_kind is WedgeKind.USERSPACE


def test_a_kernel_that_answers_without_sshd_is_a_suspect_until_the_userspace_window_ends() -> None:
    settings = WatchdogSettings(userspace_s=10.0)
    dog, clock, events = make(lambda: ProbeAnswer.KERNEL, settings=settings)
    assert advance(dog, clock, 10.5) is Verdict.SUSPECT  # a 10 s SIGSTOP survives (window opened at 1 s)
    assert advance(dog, clock, 1.0) is Verdict.WEDGED
    assert dog.wedge_kind is WedgeKind.USERSPACE


def test_sshd_answering_resets_the_userspace_window() -> None:
    settings = WatchdogSettings(userspace_s=5.0)
    flip = {"answer": ProbeAnswer.KERNEL}
    dog, clock, _ = make(lambda: flip["answer"], settings=settings)
    assert advance(dog, clock, 4.5) is Verdict.SUSPECT
    flip["answer"] = ProbeAnswer.SSHD
    assert advance(dog, clock, 0.5) is Verdict.ALIVE_BUT_DETACHED
    flip["answer"] = ProbeAnswer.KERNEL
    assert advance(dog, clock, 4.0) is Verdict.SUSPECT  # 9 s of silence, but only 4 s without sshd
    assert advance(dog, clock, 1.5) is Verdict.WEDGED


def test_a_stream_that_resumes_clears_the_suspect() -> None:
    dog, clock, events = make(lambda: ProbeAnswer.KERNEL)
    advance(dog, clock, 5.0)
    dog.heard()
    assert dog.check() is Verdict.LIVE
    assert events.names() == ["suspect", "probe", "clear"]
    assert events.seen[-1][2]["last_answer"] == "KERNEL"


def test_a_failed_reattach_restarts_probing_instead_of_trusting_the_old_answer() -> None:
    flip = {"answer": ProbeAnswer.SSHD}
    dog, clock, events = make(lambda: flip["answer"])
    assert advance(dog, clock, 3.0) is Verdict.ALIVE_BUT_DETACHED
    flip["answer"] = ProbeAnswer.DEAD
    dog.reattach_failed("connect timed out")
    assert dog.check() is Verdict.SUSPECT  # no answer yet from the fresh rounds
    assert advance(dog, clock, 1.25) is Verdict.WEDGED
    assert "reattach_failed" in events.names()


def test_rounds_do_not_wait_for_earlier_rounds_to_time_out() -> None:
    lock, running, most = threading.Lock(), [0], [0]
    release = threading.Event()

    def slow() -> ProbeAnswer:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        release.wait(2)
        with lock:
            running[0] -= 1
        return ProbeAnswer.DEAD

    dog, clock, _ = make(slow)
    for _ in range(8):  # 2 s of fake time: rounds launched at 1.0, 1.5, 2.0 s of silence
        clock.now += 0.25
        dog.check()
    time.sleep(0.1)
    assert most[0] == 3
    release.set()
    settle(dog)


def test_a_probe_that_raises_counts_as_dead() -> None:
    def broken() -> ProbeAnswer:
        raise OSError("network unreachable")

    dog, clock, _ = make(broken)
    assert advance(dog, clock, 3.0) is Verdict.WEDGED


@pytest.mark.parametrize("answer, back_to_verdict_s", [(ProbeAnswer.DEAD, 1.0), (ProbeAnswer.KERNEL, 61.0)])
def test_a_single_host_is_not_wedged_while_the_guard_says_our_network_is_down(
        answer: ProbeAnswer, back_to_verdict_s: float) -> None:
    """Frozen (DEAD) or userspace (KERNEL): no verdict while the guard says down; once it is
    back, fresh rounds first (and for a userspace wedge, a whole window of KERNEL)."""
    network = {"ok": False}
    fleet = FleetLiveness(window_s=5.0, network_ok=lambda: network["ok"])
    dog, clock, events = make(lambda: answer, fleet=fleet)
    assert advance(dog, clock, 70.0) is Verdict.CONTROLLER_NETWORK
    network["ok"] = True
    assert dog.check() is Verdict.SUSPECT  # fresh rounds first, not wedged at once
    assert advance(dog, clock, back_to_verdict_s) is Verdict.WEDGED
    guard = [f["network"] for _, what, f in events.seen if what == "guard"]
    assert guard == ["down", "up"]


def test_without_a_guard_every_host_silent_at_once_blames_our_network() -> None:
    clock = FakeClock()
    fleet = FleetLiveness(window_s=5.0)
    dogs = [Watchdog(f"ws0{i}", lambda: ProbeAnswer.DEAD, SETTINGS, fleet=fleet, clock=clock) for i in range(3)]
    for _ in range(16):
        clock.now += 0.25
        for dog in dogs:
            dog.check()
            settle(dog)
    assert [d.check() for d in dogs] == [Verdict.CONTROLLER_NETWORK] * 3
    for dog in dogs:
        dog.close()


def test_hosts_that_freeze_together_are_held_then_wedges_once_the_silence_outlasts_the_hold() -> None:
    clock, events = FakeClock(), Events()
    fleet = FleetLiveness(window_s=5.0, network_ok=lambda: True, hold_s=30.0, clock=clock)
    dogs = together(fleet, clock, ["ws01", "ws02", "ws03"], events=events)
    assert tick(dogs, clock, 3.0) == [Verdict.HELD] * 3  # a switch outage looks the same: nothing declared
    assert tick(dogs, clock, 20.0) == [Verdict.HELD] * 3
    assert tick(dogs, clock, 8.0) == [Verdict.WEDGED] * 3  # 31 s of silence: past correlated_hold_s
    holds = [f for _, what, f in events.seen if what == "silence_hold"]
    releases = [f for _, what, f in events.seen if what == "silence_release"]
    assert len(holds) == 3 and all(f["rule"] == "correlated" and len(f["peers"]) == 2 for f in holds)
    assert [f["rule"] for f in releases] == ["outlasted"] * 3


def test_a_switch_outage_shorter_than_the_hold_makes_no_verdict_and_clears() -> None:
    clock, events = FakeClock(), Events()
    fleet = FleetLiveness(window_s=5.0, network_ok=lambda: True, hold_s=60.0, clock=clock)
    dogs = together(fleet, clock, ["ws01", "ws02", "ws03"], events=events)
    assert set(tick(dogs, clock, 45.0)) == {Verdict.HELD}
    for dog in dogs:  # the switch is back: every stream speaks again
        dog.heard()
    assert [d.check() for d in dogs] == [Verdict.LIVE] * 3
    assert "clear" in events.names() and "silence_release" not in events.names()


def test_a_peer_on_the_same_segment_still_answering_lets_the_hold_go_at_once() -> None:
    clock, events = FakeClock(), Events()
    fleet = FleetLiveness(window_s=5.0, network_ok=lambda: True, hold_s=300.0, clock=clock,
                          segments={"ws01": "rack1", "ws02": "rack1", "ws03": "rack1"})
    frozen = together(fleet, clock, ["ws01", "ws02"], events=events)
    live = together(fleet, clock, ["ws03"], answer=lambda: ProbeAnswer.SSHD)
    assert tick(frozen, clock, 3.0, live=live) == [Verdict.WEDGED] * 2
    assert not [f for _, what, f in events.seen if what == "silence_hold"]  # never held: ws03 answers


def test_hosts_held_through_a_switch_outage_are_judged_by_fresh_rounds_once_a_peer_answers() -> None:
    """The switch comes back: ws03's stream speaks first and releases ws01 and ws02 (rule
    peer), whose last rounds all ran while the switch was down. Their own answers come on the
    next rounds: no wedge (caught on the fleet: two healthy hosts declared a moment after the
    first one cleared, and recorded infra)."""
    clock, events = FakeClock(), Events()
    switch = {"up": False}
    fleet = FleetLiveness(window_s=5.0, network_ok=lambda: True, hold_s=300.0, clock=clock,
                          segments={"ws01": "rack1", "ws02": "rack1", "ws03": "rack1"})
    answer = lambda: ProbeAnswer.SSHD if switch["up"] else ProbeAnswer.DEAD  # noqa: E731
    held, first_back = together(fleet, clock, ["ws01", "ws02"], answer, events), together(fleet, clock, ["ws03"], answer)
    assert tick(held + first_back, clock, 45.0) == [Verdict.HELD] * 3
    switch["up"] = True
    verdicts = [tick(held, clock, 0.25, live=first_back) for _ in range(12)]
    assert Verdict.WEDGED not in {v for round_ in verdicts for v in round_}
    assert verdicts[-1] == [Verdict.ALIVE_BUT_DETACHED] * 2  # their sshd answers: re-attach, not cycle
    assert [f["rule"] for _, what, f in events.seen if what == "silence_release"] == ["peer"] * 2


def test_without_peer_evidence_a_host_released_by_a_peer_that_stays_dead_is_a_wedge_after_its_fresh_rounds() -> None:
    """The rule before issue 32 item 15, which bench/lone_freeze.py measures as its baseline: every
    round of the hold is thrown away on the release (tests/unit/test_peer_evidence.py: the rule now)."""
    clock, events = FakeClock(), Events()
    fleet = FleetLiveness(window_s=5.0, network_ok=lambda: True, hold_s=300.0, clock=clock,
                          segments={"ws01": "rack1", "ws02": "rack1"}, peer_evidence=False)
    (frozen,), (peer,) = together(fleet, clock, ["ws01"], events=events), together(fleet, clock, ["ws02"])
    assert tick([frozen, peer], clock, 10.0) == [Verdict.HELD] * 2
    assert tick([frozen], clock, 0.25, live=[peer]) == [Verdict.SUSPECT]  # released: fresh rounds first
    assert tick([frozen], clock, 3.0, live=[peer]) == [Verdict.WEDGED]


def test_a_peer_on_another_segment_does_not_vouch_for_this_one() -> None:
    clock = FakeClock()
    fleet = FleetLiveness(window_s=5.0, network_ok=lambda: True, hold_s=300.0, clock=clock,
                          segments={"ws01": "rack1", "ws02": "rack1", "ws03": "rack2"})
    frozen = together(fleet, clock, ["ws01", "ws02"])
    live = together(fleet, clock, ["ws03"], answer=lambda: ProbeAnswer.SSHD)
    assert tick(frozen, clock, 10.0, live=live) == [Verdict.HELD] * 2


def test_a_hosts_side_witness_that_answers_lets_the_hold_go() -> None:
    from reprofleet.liveness.witness import NetworkCheck

    clock, events = FakeClock(), Events()
    asked: list[tuple[str, ...]] = []
    fleet = FleetLiveness(window_s=5.0, network_ok=lambda: True, hold_s=300.0, clock=clock,
                          host_witnesses={"ws01": ["10.0.0.2"], "ws02": ["10.0.0.2"]},
                          hosts_side=lambda addresses: asked.append(tuple(addresses)) or NetworkCheck(True, "answers"))
    dogs = together(fleet, clock, ["ws01", "ws02"], events=events)
    assert tick(dogs, clock, 3.0) == [Verdict.WEDGED] * 2
    assert asked and set(asked) == {("10.0.0.2",)}


def test_a_lone_freeze_keeps_its_three_second_path_while_the_others_stream() -> None:
    clock = FakeClock()
    fleet = FleetLiveness(window_s=5.0, network_ok=lambda: True, hold_s=300.0, clock=clock)
    frozen = together(fleet, clock, ["ws01"])
    live = together(fleet, clock, ["ws02", "ws03"], answer=lambda: ProbeAnswer.SSHD)
    assert tick(frozen, clock, 3.0, live=live) == [Verdict.WEDGED]


def test_a_host_whose_attempt_ended_while_silent_still_holds_its_peers() -> None:
    clock = FakeClock()
    fleet = FleetLiveness(window_s=5.0, network_ok=lambda: True, hold_s=300.0, clock=clock)
    first, second = together(fleet, clock, ["ws01", "ws02"])
    assert tick([first, second], clock, 3.0) == [Verdict.HELD] * 2
    first.close()  # its attempt ended (a deadline, a stop) without ws01 being heard again
    assert tick([second], clock, 3.0) == [Verdict.HELD]


def test_dead_rounds_restart_the_userspace_window() -> None:
    """KERNEL for 40 s, then our own network down for 20 s (every round DEAD, the guard down),
    then KERNEL again: the 60 s window starts again after the outage, it does not run through it."""
    state = {"answer": ProbeAnswer.KERNEL, "ok": True}
    fleet = FleetLiveness(window_s=5.0, network_ok=lambda: state["ok"])
    dog, clock, _ = make(lambda: state["answer"], fleet=fleet)
    assert advance(dog, clock, 40.0) is Verdict.SUSPECT
    state.update(answer=ProbeAnswer.DEAD, ok=False)
    assert advance(dog, clock, 20.0) is Verdict.CONTROLLER_NETWORK
    state.update(answer=ProbeAnswer.KERNEL, ok=True)
    back = clock.now
    verdicts = []
    for _ in range(70):
        verdicts.append((clock.now - back, advance(dog, clock, 1.0)))
    first = next(t for t, v in verdicts if v is Verdict.WEDGED)
    assert 59.0 <= first <= 62.0, first  # 60 s of KERNEL after the outage, not 0 s
    assert dog.wedge_kind is WedgeKind.USERSPACE


def test_one_silent_host_among_live_ones_is_a_wedge_without_a_guard() -> None:
    clock = FakeClock()
    fleet = FleetLiveness(window_s=5.0)
    silent = Watchdog("ws01", lambda: ProbeAnswer.DEAD, SETTINGS, fleet=fleet, clock=clock)
    live = Watchdog("ws02", lambda: ProbeAnswer.SSHD, SETTINGS, fleet=fleet, clock=clock)
    for _ in range(12):
        clock.now += 0.25
        live.heard()
        silent.check()
        settle(silent)
    assert silent.check() is Verdict.WEDGED


# -- the partition guard (witness.py) ---------------------------------------------------

def _guard(monkeypatch: Any, *, carrier: bool | None, gateway: str | None = None) -> None:
    from reprofleet.liveness import witness

    monkeypatch.setattr(witness, "local_link_up", lambda address: carrier)
    monkeypatch.setattr(witness, "route_to", lambda address: witness.Route("eth9", gateway))


def test_the_guard_says_down_without_carrier_whatever_else_answers(monkeypatch: Any) -> None:
    from reprofleet.model import Host
    from reprofleet.liveness.witness import campaign_guard

    _guard(monkeypatch, carrier=False, gateway="127.0.0.1")
    check = campaign_guard([Host("ws01", "127.0.0.1")], PowerLog(None), period_s=0).check()
    assert not check and "carrier" in check.reason


def test_a_gateway_that_answers_proves_our_network_for_a_single_silent_host(monkeypatch: Any) -> None:
    from reprofleet.model import Host
    from reprofleet.liveness.witness import campaign_guard

    _guard(monkeypatch, carrier=True, gateway="127.0.0.1")  # loopback answers echo
    assert campaign_guard([Host("ws01", "192.0.2.7")], PowerLog(None), period_s=0).check()


def test_an_inventory_witness_that_stays_silent_and_no_power_device_is_our_network_down(monkeypatch: Any) -> None:
    from reprofleet.liveness import witness
    from reprofleet.model import Host

    _guard(monkeypatch, carrier=True)
    monkeypatch.setattr(witness, "witness_answers", lambda address, timeout=1.0: False)
    host = Host("ws01", "192.0.2.7", vars={"witness": "192.0.2.1"})
    check = witness.campaign_guard([host], PowerLog(None), period_s=0).check()
    assert not check and "192.0.2.1" in check.reason


def test_a_power_device_that_answers_with_an_error_still_proves_our_network(
        monkeypatch: Any, tmp_path: Any) -> None:
    import socket

    from reprofleet.liveness import witness
    from reprofleet.model import Host, PowerPort
    from reprofleet.power import PowerLog

    _guard(monkeypatch, carrier=True)
    with socket.socket() as closed:  # a device address whose kernel answers with a RST
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    pdu = PowerPort("tasmota", f"http://127.0.0.1:{port}", "9")
    check = witness.campaign_guard([Host("ws01", "192.0.2.7", pdu=pdu)], PowerLog(tmp_path / "p.jsonl"),
                                   period_s=0).check()
    assert check, check.reason
