"""Evidence from beyond a frozen host's disk, on the simulated fleet: what its BMC logged
(Redfish LogServices, IPMI SEL) and what its outlet metered at the wall as it froze."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import pytest

from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_records
from reprofleet.runner.recovery import recovery_factory
from reprofleet.sim.power import HttpPlugServer, IpmiBmc, RedfishBmc
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import settings_for, write_playbook

pytestmark = pytest.mark.fleet

HOSTS = ("bmc-rf", "bmc-ipmi", "bmc-plug")


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory, sim_ready: None) -> Iterator[dict[str, Any]]:
    """One campaign on three hosts that each wedge once: behind a Redfish BMC, an IPMI BMC and a metering plug."""
    from reprofleet.sim import Fleet

    tmp = tmp_path_factory.mktemp("bmc")
    fleet = Fleet.up(tuple(SimHostSpec(name, script=("wedge", "clean"), boot_delay_s=0.5) for name in HOSTS))
    sims: list[Any] = []
    failed = True
    monkeypatch = pytest.MonkeyPatch()
    try:
        switch = {h.name: h.paths.power for h in fleet.hosts}
        redfish = RedfishBmc(tmp / "redfish", {"bmc-rf": switch["bmc-rf"]}, password="s3cret-rf").start()
        sims.append(redfish)
        ipmi = IpmiBmc(tmp / "ipmi", {"bmc-ipmi": switch["bmc-ipmi"]}, password="s3cret-ipmi").start()
        sims.append(ipmi)
        plug = HttpPlugServer(tmp / "plug", "tasmota", {"1": switch["bmc-plug"]}, password="s3cret-plug").start()
        sims.append(plug)
        monkeypatch.setenv("RF_BMC_RF", str(redfish.secret))
        monkeypatch.setenv("RF_BMC_IPMI", ipmi.secret)
        monkeypatch.setenv("RF_BMC_PLUG", str(plug.secret))
        pdus = {"bmc-rf": redfish.pdu_block("bmc-rf", "env:RF_BMC_RF"),
                "bmc-ipmi": ipmi.pdu_block("bmc-ipmi", "env:RF_BMC_IPMI"),
                "bmc-plug": plug.pdu_block("1", "env:RF_BMC_PLUG")}
        inventory = fleet.write_inventory(tmp / "inventory.yml", pdu=pdus)
        book = write_playbook(tmp / "book", attempts=2, attempt_timeout=30)
        plan = make_plan(load_playbook(book), load_inventory(inventory).hosts)
        result = run_campaign(plan, settings_for(fleet), tmp / "reports", recovery_factory=recovery_factory)
        records = list(read_records(result.directory.attempts))
        yield {"result": result, "records": records,
               "wedges": {r["host"]: r for r in records if r["outcome"] == "wedge"}}
        failed = False
    finally:
        for sim in sims:
            sim.stop()
        monkeypatch.undo()
        fleet.down(remove_files=not failed)


def test_every_host_wedged_once_and_was_power_cycled(campaign: dict[str, Any]) -> None:
    assert sorted(campaign["wedges"]) == sorted(HOSTS)
    assert sorted(r["outcome"] for r in campaign["records"]) == ["clean"] * 3 + ["wedge"] * 3


@pytest.mark.parametrize("host", ["bmc-rf", "bmc-ipmi"])
def test_a_wedge_behind_a_bmc_has_the_bmc_event_log_since_its_attempt_started(
        campaign: dict[str, Any], host: str) -> None:
    wedge = campaign["wedges"][host]
    forensics = wedge["forensics"]
    events = forensics["bmc_events"]
    assert "bmc_notes" not in forensics, forensics.get("bmc_notes")
    assert all(set(e) == {"time", "severity", "message", "source"} for e in events)
    started, ended = _epoch(wedge["started"]), _epoch(wedge["ended"])
    assert all(_epoch(e["time"]) >= started - 5 for e in events)  # nothing from before the attempt
    text = [e["message"].lower() for e in events]
    off = next(i for i, m in enumerate(text) if "power off" in m or "turned off" in m)
    on = next(i for i, m in enumerate(text) if ("power down deasserted" in m or "turned on" in m) and i > off)
    assert off < on  # the power cycle, in order
    freeze = [e for e in events if e["severity"] == "Critical"]
    assert freeze and _epoch(freeze[0]["time"]) <= _epoch(events[off]["time"]) + 1  # the wedge, logged before the cycle
    assert _epoch(freeze[0]["time"]) >= started - 1 and _epoch(events[off]["time"]) > ended - 60
    assert all(e["source"].startswith("redfish" if host == "bmc-rf" else "ipmi SEL") for e in events)


def test_a_host_behind_a_plain_plug_has_no_bmc_events_and_no_note(campaign: dict[str, Any]) -> None:
    forensics = campaign["wedges"]["bmc-plug"]["forensics"]
    assert "bmc_events" not in forensics and "bmc_notes" not in forensics


@pytest.mark.parametrize("host", ["bmc-plug", "bmc-rf"])
def test_a_wedge_on_a_metering_device_has_the_wall_power_of_the_last_minute_before_the_freeze(
        campaign: dict[str, Any], host: str) -> None:
    wedge = campaign["wedges"][host]
    trace = wedge["telemetry"]["wall_trace"]
    before = [(t, w) for t, w in trace if t <= 0]
    assert len(before) >= 2 and all(-61 <= t <= 0 for t, _ in before)
    assert all(w > 80 for _, w in trace)  # a host under load, on: the board and a busy GPU
    assert [t for t, _ in trace] == sorted(t for t, _ in trace)
    # the readings up to the freeze are the ones in the attempt's stream (one taken as the attempt
    # ended may miss the stream, which closes first, but not the record)
    stream = [json.loads(line) for line in
              (campaign["result"].directory.root / wedge["stream"]).read_text().splitlines() if line.strip()]
    walls = {round(line["w"], 1) for line in stream if line.get("k") == "wall"}
    assert {round(w, 1) for _, w in before} <= walls


def test_an_ipmi_bmc_without_dcmi_is_said_to_give_no_wall_power(campaign: dict[str, Any]) -> None:
    telemetry = campaign["wedges"]["bmc-ipmi"]["telemetry"]
    assert "wall_trace" not in telemetry
    assert "no wall-power reading" in telemetry["wall_note"]


def test_the_report_shows_the_wall_power_and_the_bmc_log_of_each_wedge(campaign: dict[str, Any]) -> None:
    from reprofleet.report.evidence import bmc_words, wall_at_freeze, wall_words

    wedges = campaign["wedges"]
    assert "W at the freeze" in wall_words(wall_at_freeze(wedges["bmc-plug"]))
    assert "no wall-power reading" in wall_words(wall_at_freeze(wedges["bmc-ipmi"]))
    ipmi = wedges["bmc-ipmi"]["forensics"]
    assert bmc_words(ipmi).startswith(f"{len(ipmi['bmc_events'])} entries: Critical")  # the wedge leads
