"""The partition guard costs O(1): built once, one witness per device, asked at once within a
budget, stopping at the first answer, cached under a lock from the time it finished, one
check at a time, and never waited for on a stream thread (``peek``)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from reprofleet.liveness.witness import PartitionGuard, Witness, build_witnesses, judge
from reprofleet.model import Host, PowerPort, frozen_mapping
from reprofleet.power import PowerLog


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            return self.now


def _blocked(gate: threading.Event, done: list[str], name: str) -> Witness:
    def ask() -> bool:
        gate.wait(10)
        done.append(name)
        return False
    return Witness(name, ask)


def test_the_first_answer_ends_the_check_without_waiting_for_slow_witnesses() -> None:
    gate, done = threading.Event(), []
    slow = [_blocked(gate, done, f"slow-{i}") for i in range(5)]
    guard = PartitionGuard([*slow, Witness("pdu", lambda: True)], period_s=60, budget_s=30.0)
    check = guard.check()
    assert check.ok and check.reason == "pdu answers"
    assert done == []  # the slow ones were still being asked when the answer came
    gate.set()


def test_no_answer_within_the_budget_is_silence_and_the_check_ends() -> None:
    gate, done = threading.Event(), []
    guard = PartitionGuard([_blocked(gate, done, "switch"), _blocked(gate, done, "pdu")], period_s=60, budget_s=0.2)
    check = guard.check()
    assert not check.ok and "switch" in check.reason and "pdu" in check.reason
    assert done == []
    gate.set()


def test_many_callers_share_one_check_per_period() -> None:
    clock, asked = Clock(), []
    gate = threading.Event()

    def pdu() -> bool:
        asked.append(1)
        gate.wait(5)
        return True

    guard = PartitionGuard([Witness("pdu", pdu)], period_s=3.0, budget_s=5.0, clock=clock)
    callers = [threading.Thread(target=guard.check) for _ in range(20)]
    for t in callers:
        t.start()
    for _ in range(10):
        guard.peek()
    gate.set()
    for t in callers:
        t.join(10)
    assert len(asked) == 1 and guard.checks == 1
    clock.now += 2.0
    assert guard.peek() is not None and len(asked) == 1  # still fresh
    clock.now += 2.0
    assert guard.check().ok and len(asked) == 2  # stale: asked once more


def test_an_answer_is_fresh_from_the_time_its_check_finished() -> None:
    clock = Clock()

    def slow_pdu() -> bool:
        with clock.lock:
            clock.now += 0.8  # a device that took most of the budget
        return True

    guard = PartitionGuard([Witness("pdu", slow_pdu)], period_s=1.0, budget_s=2.0, clock=clock)
    assert guard.check().ok
    with clock.lock:
        clock.now += 0.5  # 1.3 s after the check started, 0.5 s after it finished
    assert guard.peek() is not None


def test_peek_never_waits_it_starts_a_check_and_says_not_yet() -> None:
    gate = threading.Event()
    guard = PartitionGuard([Witness("pdu", lambda: gate.wait(5))], period_s=60, budget_s=5.0)
    assert guard.peek() is None  # a stream thread gets no verdict rather than a wait
    gate.set()
    assert guard.check().ok
    assert guard.peek() is not None


def test_no_carrier_is_down_whatever_else_answers() -> None:
    guard = PartitionGuard([Witness("carrier", lambda: False, carrier=True), Witness("pdu", lambda: True)],
                           period_s=0, budget_s=1.0)
    check = guard.check()
    assert not check.ok and "carrier" in check.reason


def test_a_witness_that_raises_did_not_answer() -> None:
    def broken() -> bool:
        raise OSError("unreachable")

    assert not judge([(Witness("w", broken), False)]).ok
    assert not PartitionGuard([Witness("w", broken)], period_s=0).check().ok


def test_fifty_hosts_on_one_pdu_have_one_power_witness(tmp_path: Path) -> None:
    hosts = [Host(f"ws{i:02d}", f"192.0.2.{i + 1}", pdu=PowerPort("snmp", "udp://192.0.2.250", str(i + 1)))
             for i in range(50)]
    found = [w for w in build_witnesses(hosts, PowerLog(tmp_path / "power.jsonl")) if w.name.startswith("power")]
    assert [w.name for w in found] == ["power device udp://192.0.2.250"]


@pytest.mark.parametrize("driver, outlet", [("tasmota", "9"), ("homeassistant", "switch.ws01_plug")])
def test_an_http_device_is_asked_with_a_handshake_not_a_request(tmp_path: Path, driver: str, outlet: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("reprofleet.liveness.witness.probe_icmp_echo", lambda *a: False)  # only the port may answer
    with socket.socket() as closed:  # a device address whose kernel answers with a RST
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    log = tmp_path / "power.jsonl"
    host = Host("ws01", "192.0.2.7", pdu=PowerPort(driver, f"http://127.0.0.1:{port}", outlet))
    (pdu,) = [w for w in build_witnesses([host], PowerLog(log)) if w.name.startswith("power")]
    assert pdu.ask() is True
    assert not log.exists()  # no status read, nothing in power.jsonl


def test_a_hosts_side_witness_is_asked_in_the_background_once_per_period() -> None:
    from reprofleet.liveness.witness import HostsSideWitness

    clock, asked = Clock(), []
    witness = HostsSideWitness(period_s=3.0, answers=lambda address, timeout: asked.append(address) or True,
                               clock=clock)
    assert witness.peek([]) is None  # no witness named: nothing to ask
    first = witness.peek(["10.0.0.2"])
    for _ in range(100):
        if first is not None:
            break
        threading.Event().wait(0.01)
        first = witness.peek(["10.0.0.2"])
    assert first is not None and first.ok and asked == ["10.0.0.2"]
    assert witness.peek(["10.0.0.2"]) is not None and asked == ["10.0.0.2"]


def test_the_campaign_wires_each_hosts_witness_and_segment(tmp_path: Path) -> None:
    from reprofleet.campaign.run import fleet_liveness
    from reprofleet.clock import SystemClock
    from reprofleet.runner.context import RunSettings
    from reprofleet.remote.transport import TransportSettings

    hosts = [Host("ws01", "10.1.2.3", vars={"witness": ["10.1.2.1"]}), Host("ws02", "10.1.2.4", vars={"segment": "r7"})]
    settings = RunSettings(transport=TransportSettings(known_hosts=tmp_path / "kh"))
    fleet = fleet_liveness(hosts, settings, PowerLog(None), SystemClock())
    assert fleet._host_witnesses == {"ws01": ("10.1.2.1",), "ws02": ()}
    assert fleet._segments == {"ws01": "subnet 10.1.2.0/24", "ws02": "segment r7"}
    assert fleet.hold_s == 300.0


def _command_witness(tmp_path: Path, status_command: str, status_from: str = "exit_code") -> Witness:
    port = PowerPort("command", "pdu-local", "3", options=frozen_mapping({
        "on_command": "true", "off_command": "true", "status_command": status_command, "status_from": status_from}))
    (pdu,) = [w for w in build_witnesses([Host("ws01", "192.0.2.7", pdu=port)], PowerLog(tmp_path / "power.jsonl"))
              if w.name.startswith("power")]
    return pdu


def test_a_command_device_whose_status_exits_1_does_not_answer_for_the_network(tmp_path: Path) -> None:
    """A fence agent's exit 1 (the device unreachable) read as OFF made the guard count the
    device as answering: the network would have looked up while it was cut."""
    assert _command_witness(tmp_path, "exit 1").ask() is False
    assert _command_witness(tmp_path, "exit 2").ask() is True  # off is an answer
    assert _command_witness(tmp_path, "exit 0").ask() is True


def test_the_guard_decides_on_the_errors_type_not_its_words(tmp_path: Path) -> None:
    """A definite answer is the device answering whatever its text says (here a status that
    contradicts itself, printing words a message test once took for silence)."""
    assert _command_witness(tmp_path, "echo 'on: the PDU gave up after 3 tries'; exit 2", "output").ask() is True
    assert _command_witness(tmp_path, "echo 'off'; exit 1").ask() is False  # no try answered, whatever it printed
