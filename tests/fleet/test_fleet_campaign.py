"""End to end over real SSH: a campaign on simulated hosts, streams, re-attach, host keys.

One fleet for the module (bringing a fleet up costs more than a test here): each test has a
host of its own in it, with the spec it needs, and runs on an inventory of that host alone,
so no test sees another's state and none needs a reset.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from reprofleet.remote.agent import AgentClient, load_bundle
from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.errors import HostKeyError
from reprofleet.inventory import load_inventory
from reprofleet.model import EventKind, Outcome
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_stream
from reprofleet.runner.recovery import recovery_factory
from reprofleet.sim.spec import SimHostSpec
from reprofleet.remote.transport import TransportSettings, connect
from tests.support.fleet_campaign import settings_for, write_playbook

pytestmark = pytest.mark.fleet

# time_scale 0.02 where a test checks outcomes, policy or cache, not the stream's length or timing
SPECS = (SimHostSpec(name="fa"), SimHostSpec(name="fb"),
         SimHostSpec(name="cls", script=("clean", "error", "hang"), time_scale=0.02),
         SimHostSpec(name="str", script=("clean",)), SimHostSpec(name="drop", script=("clean",), time_scale=0.08),
         SimHostSpec(name="key"), SimHostSpec(name="pol", script=("clean", "clean", "clean"), time_scale=0.02),
         SimHostSpec(name="cch", script=("clean", "clean"), time_scale=0.02))


@dataclasses.dataclass(frozen=True)
class Hosts:
    """Some hosts of the module's fleet: an inventory of them alone, and the fleet's files."""

    fleet: Any
    inventory_path: Path

    @property
    def known_hosts_path(self) -> Path:
        return Path(self.fleet.known_hosts_path)


@pytest.fixture(scope="module")
def campaign_fleet(sim_ready: None) -> Iterator[Any]:
    from reprofleet.sim import Fleet

    fleet = Fleet.up(SPECS)
    try:
        yield fleet
    finally:
        fleet.down(remove_files=True)


@pytest.fixture
def hosts_of(campaign_fleet: Any, tmp_path: Path) -> Any:
    """``hosts_of(*names) -> Hosts``: the named hosts of the module's fleet."""
    def pick(*names: str) -> Hosts:
        return Hosts(campaign_fleet, campaign_fleet.write_inventory(tmp_path / f"inventory-{'-'.join(names)}.yml",
                                                                   hosts=names))

    return pick


def run(fleet: Any, book_path: Path, reports: Path, **overrides: Any):
    inventory = load_inventory(fleet.inventory_path)
    plan = make_plan(load_playbook(book_path), inventory.hosts)
    return run_campaign(plan, settings_for(fleet, **overrides), reports, recovery_factory=recovery_factory)


def test_facts_come_from_every_host_over_ssh(hosts_of) -> None:
    fleet = hosts_of("fa", "fb")
    hosts = load_inventory(fleet.inventory_path).hosts
    seen = {}
    for host in hosts:
        session = connect(host, TransportSettings(known_hosts=Path(fleet.known_hosts_path)))
        try:
            agent = AgentClient(session, load_bundle(), host.python)
            agent.push()
            seen[host.name] = dict(agent.facts().as_json)
        finally:
            session.close()
    assert set(seen) == {"fa", "fb"}
    assert seen["fa"]["boot_id"] != seen["fb"]["boot_id"]
    assert seen["fa"]["hostname"] == "fa"
    gpu = seen["fa"]["gpus"][0]
    assert "RTX PRO 6000 Blackwell" in gpu["name"]
    assert gpu["power_limit_w"]["max"] == pytest.approx(600.0)


def test_clean_error_and_hang_attempts_are_classified(hosts_of, tmp_path: Path) -> None:
    fleet = hosts_of("cls")
    book = write_playbook(tmp_path, attempts=3, attempt_timeout=8)  # the hang ends at it; a clean start takes ~2 s
    result = run(fleet, book, tmp_path / "reports")
    outcomes = [r["outcome"] for r in sorted(result.records, key=lambda r: r["attempt_index"])]
    assert outcomes == ["clean", "error", "hang"]
    error = next(r for r in result.records if r["outcome"] == "error")
    assert error["exit_code"] == 1 and "Traceback" not in (error["last_log_line"] or "Traceback")
    for record in result.records:
        assert record["policy"] is not None  # read back from the (simulated) GPU
        assert record["boot_id"] and record["stream"]


def test_the_stream_holds_every_line_the_poc_printed_in_order(hosts_of, tmp_path: Path) -> None:
    fleet = hosts_of("str")
    book = write_playbook(tmp_path, attempts=1)
    result = run(fleet, book, tmp_path / "reports")
    (record,) = result.records
    assert record["outcome"] == Outcome.CLEAN.value
    stream = read_stream(result.directory.root / record["stream"])
    logged = [line["line"] for line in stream if line["k"] == EventKind.LOG.value]
    host = load_inventory(fleet.inventory_path).hosts[0]
    session = connect(host, TransportSettings(known_hosts=Path(fleet.known_hosts_path)))
    try:
        printed = session.run(f'cat "$HOME"/.cache/reprofleet/attempts/{record["attempt"]}/output.log').stdout
    finally:
        session.close()
    assert logged == printed.rstrip("\n").split("\n")
    assert len(logged) > 20
    phases = [line["phase"] for line in stream if line["k"] == "phase"]
    assert phases[0] == "engine_init" and "cuda_graph_capture" in phases
    seqs = [line["seq"] for line in stream if "seq" in line and line["k"] != "hb"]
    assert seqs == list(range(len(seqs)))


def test_a_dropped_ssh_session_does_not_stop_the_poc_and_attach_loses_nothing(hosts_of, tmp_path: Path) -> None:
    fleet = hosts_of("drop")
    book = write_playbook(tmp_path, attempts=1)
    dropped = threading.Event()

    def drop_when_started(host: str, **fields: Any) -> None:
        if fields.get("phase") == "model_load" and not dropped.is_set():
            dropped.set()
            fleet.fleet.host("drop").drop_ssh_sessions()

    inventory = load_inventory(fleet.inventory_path)
    plan = make_plan(load_playbook(book), inventory.hosts)
    result = run_campaign(plan, settings_for(fleet), tmp_path / "reports", progress=drop_when_started,
                          recovery_factory=recovery_factory)
    assert dropped.is_set()
    (record,) = result.records
    assert record["outcome"] == "clean"
    stream = read_stream(result.directory.root / record["stream"])
    seqs = [line["seq"] for line in stream if line["k"] != "hb"]
    assert seqs == list(range(len(seqs))), "a line was lost or repeated across the re-attach"
    assert stream[-1]["k"] == "exit" or any(line["k"] == "exit" for line in stream)


def test_a_host_whose_key_changed_is_refused(hosts_of, tmp_path: Path) -> None:
    fleet = hosts_of("key")
    host = dataclasses.replace(load_inventory(fleet.inventory_path).hosts[0], vars={})  # use the file we give
    known = Path(fleet.known_hosts_path).read_text().splitlines()
    other_key = "AAAAC3NzaC1lZDI1NTE5AAAAIOr4Ew1Yc1o7GnGJbXo9zqYy1o2Xq8m2qOa0pQ6u9Xb3"
    forged = [" ".join(line.split()[:1] + ["ssh-ed25519", other_key]) for line in known if line.strip()]
    bad = tmp_path / "known_hosts"
    bad.write_text("\n".join(forged) + "\n")
    with pytest.raises(HostKeyError, match="CHANGED"):
        connect(host, TransportSettings(known_hosts=bad))
    with pytest.raises(HostKeyError, match="unknown host key"):
        connect(host, TransportSettings(known_hosts=tmp_path / "empty_known_hosts"))
    started = time.monotonic()
    session = connect(host, TransportSettings(known_hosts=tmp_path / "new_known_hosts", accept_new_host_keys=True))
    session.close()
    assert (tmp_path / "new_known_hosts").read_text().strip()
    assert time.monotonic() - started < 10


def test_clock_lock_and_power_limit_cells_record_what_the_gpu_read_back(hosts_of, tmp_path: Path) -> None:
    fleet = hosts_of("pol")
    cells = ("  - name: lgc-2800\n    graphics_clocks: [180, 2800]\n"
             "  - name: pl-350\n    power_limit: 350\n  - name: default\n")
    book = write_playbook(tmp_path, attempts=1, cells=cells)
    result = run(fleet, book, tmp_path / "reports")
    by_cell = {r["cell"]: r for r in result.records}
    assert by_cell["lgc-2800"]["policy"]["graphics_clocks"] == [180, 2800]
    assert by_cell["lgc-2800"]["factors"]["graphics_clocks"] == [180, 2800]
    assert by_cell["pl-350"]["policy"]["power_limit_w"] == 350.0
    assert by_cell["pl-350"]["policy"]["graphics_clocks"][1] > 2800  # the lock of the cell before was reset
    assert by_cell["default"]["policy"]["power_limit_w"] == 600.0
    telemetry = by_cell["lgc-2800"]["telemetry"]
    assert telemetry["gfx_mhz_peak"] <= 2800 and telemetry["samples"] > 0


def test_a_starting_cache_is_pushed_once_and_each_record_says_what_cache_it_saw(hosts_of, tmp_path: Path) -> None:
    fleet = hosts_of("cch")
    seed = tmp_path / "book" / "seed-cache"
    (seed / "flashinfer").mkdir(parents=True)
    (seed / "flashinfer" / "autotune.json").write_text('{"configs": 42}\n')
    book = write_playbook(tmp_path / "book", attempts=2)
    book.write_text(book.read_text().replace("poc: {script:", "poc: {cache_source: seed-cache, script:"))
    result = run(fleet, book, tmp_path / "reports")
    first, second = sorted(result.records, key=lambda r: r["attempt_index"])
    assert first["cache"] and second["cache"] and first["cache"] != second["cache"]  # the first run warmed it
    host = load_inventory(fleet.inventory_path).hosts[0]
    session = connect(host, TransportSettings(known_hosts=Path(fleet.known_hosts_path)))
    try:
        key = first["runtime"]["cache_key"]
        seeded = session.run(f'cat "$HOME"/.cache/reprofleet/cache/{key}/flashinfer/autotune.json').stdout
    finally:
        session.close()
    assert seeded == '{"configs": 42}\n'
