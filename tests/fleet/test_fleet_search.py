"""A boundary search and a bisection on the simulated fleet, end to end (issue 23's acceptance).

Two hosts whose P(wedge | graphics-clock ceiling) is a known function (the sim's ramp: 0 up
to 2400 MHz, rising linearly to 1 at 2650 MHz, so 0.8 at 2600: steep enough that the 5-6 clean
runs which would wrongly clear 2600 at delta 0.1 happen with chance 0.2^5, never in practice) and whose vLLM images wedge
before 0.26.0 and never from it. (a) A ``search:`` over [2200, 2400, 2600, 2800] with
ε = 0.3, δ = 0.1 is killed (SIGKILL of ``invoke campaign``) after its third record and
resumed: it must end with 2400 MHz as its boundary (2600's P = 0.8 > ε), the posterior
under δ, a ``search_done`` event whose result is the one the report computes from the
records, and a report with the ladder and posterior figures. (b) A ``bisect:`` over
0.24.0, 0.25.1, 0.26.0, 0.27.0 must report first good 0.26.0, last bad 0.25.1, posterior
>= 0.95, the first good after the 5 clean runs that its ``min_rate: 0.5`` asks.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support.kill9_harness import Controller, KillPoint, Snapshot, campaign_folder, reset_host, wait_and_kill
from tests.support.fleet_campaign import POC, settings_for

pytestmark = pytest.mark.fleet

QUIET = dict(p_error=0.0, p_hang=0.0, p_reboot=0.0, boot_delay_s=0.5, time_scale=0.02)
TRUTH = dict(p_wedge=1.0, safe_clock_mhz=2400, wedge_ramp_mhz=250, vllm_fixed_in="0.26.0", vllm_factors=[],
             vllm_fixed_factor=0.0)
HOSTS = ("srch-a", "srch-b")
DEADLINE_S = 240.0


def _book(folder: Path, block: str) -> Path:
    (folder / "poc").mkdir(parents=True, exist_ok=True)
    shutil.copy(POC, folder / "poc" / POC.name)
    path = folder / "book.yml"
    path.write_text(
        "name: fleet-search\n"
        f"poc: {{script: poc/{POC.name}}}\n"
        "runtime: {kind: docker, image: 'vllm/vllm-openai:v{vllm}', docker_args: [--ipc, host]}\n"
        "timeouts: {attempt: 30, boot: 60}\n"
        "at_risk_phase: cuda_graph_capture\n"
        "defaults:\n  vars: {vllm: '0.25.1'}\n  args: {spec_tokens: 9, gpu_memory_utilization: 0.87}\n" + block)
    return path


SEARCH = ("search:\n  factor: graphics_clocks\n  levels: [2200, 2400, 2600, 2800]\n"
          "  target: {epsilon: 0.3, delta: 0.1}\n  budget: {attempts: 40, power_cycles: 10}\n")
BISECT = ("bisect:\n  factor: vars.vllm\n  versions: ['0.24.0', '0.25.1', '0.26.0', '0.27.0']\n"
          "  known: {bad: first}\n  posterior: 0.95\n  target: {epsilon: 0.5, delta: 0.2}\n"
          "  budget: {attempts: 40, power_cycles: 12}\n  min_rate: 0.5\n")  # the sim's old images wedge every time


@pytest.fixture(scope="module")
def search_fleet(sim_ready: None) -> Iterator[Any]:
    from reprofleet.sim import Fleet
    from reprofleet.sim.spec import spec_from_mapping

    fleet = Fleet.up(tuple(spec_from_mapping({"name": name, **QUIET, **TRUTH}) for name in HOSTS))
    try:
        fleet.attach_plug("tasmota")
        yield fleet
    finally:
        fleet.down(remove_files=True)


def _env(fleet: Any, reports: Path) -> dict[str, str]:
    return {"INVOKE_REPROFLEET_REPORTS": str(reports), "INVOKE_REPROFLEET_KNOWN_HOSTS": str(fleet.known_hosts_path),
            "INVOKE_REPROFLEET_DWELL_S": "1", "INVOKE_REPROFLEET_STABILITY_S": "1",
            "INVOKE_REPROFLEET_REBOOT_GRACE_S": "1", "INVOKE_REPROFLEET_SAMPLE_HZ": "5",
            "INVOKE_REPROFLEET_CORRELATED_HOLD_S": "3", "INVOKE_REPROFLEET_CONTROLLER": "search",
            "PYTHONUNBUFFERED": "1"}


def _done(root: Path) -> list[dict[str, Any]]:
    return Snapshot.read(root).events_of("search_done")


def test_a_search_killed_mid_way_and_resumed_ends_with_the_true_boundary_and_its_report(
        search_fleet: Any, tmp_path: Path) -> None:
    from reprofleet.records.pooling import load_pool
    from reprofleet.report.search import search_report

    for host in search_fleet.hosts:
        reset_host(host, host.paths.hw / "attempts.json")
    book, reports = _book(tmp_path / "book", SEARCH), tmp_path / "reports"
    started = time.monotonic()
    first = Controller.start(_env(search_fleet, reports), Path(search_fleet.inventory_path), book, tmp_path / "c1.log")
    mid = KillPoint("mid-search", lambda now, _: len(now.record_lines) >= 3 and not now.events_of("search_done"))
    killed = wait_and_kill(first, reports, mid, DEADLINE_S)
    assert not killed.events_of("search_done")
    root = campaign_folder(reports)
    resumed = Controller.start(_env(search_fleet, reports), Path(search_fleet.inventory_path), book,
                               tmp_path / "c2.log", resume=root)
    assert resumed.wait(DEADLINE_S) == 0, resumed.tail()
    print(f"search, killed and resumed: {time.monotonic() - started:.1f} s")
    (done,) = _done(root)
    (group,) = done["result"]
    assert group["boundary"] == 1 and group["done"], group  # 2400 MHz: the riskiest level with P <= epsilon
    assert group["p_bad_at_boundary"] < 0.1
    records = Snapshot.read(root).records
    slots = [(r["host"], r["cell"], r["attempt_index"]) for r in records if r.get("outcome") != "infra"]
    assert len(slots) == len(set(slots))  # no attempt recorded twice across the kill
    assert not any(r["cell"] == "search-graphics_clocks-2800" and r.get("outcome") == "clean" for r in records)
    recomputed = search_report(load_pool([root]), [root])
    assert recomputed is not None and json.loads(json.dumps(recomputed.to_json()["result"])) == done["result"]
    text = (root / "report.md").read_text()
    assert "highest clean level meeting ε=0.3, δ=0.1: 2400 MHz" in text
    page = (root / "report.html").read_text()
    assert 'aria-label="search ladder"' in page and 'aria-label="search posterior per level"' in page


def test_a_bisection_over_four_images_finds_the_change_between_the_second_and_the_third(
        search_fleet: Any, tmp_path: Path) -> None:
    from reprofleet.campaign.run import make_plan, run_campaign
    from reprofleet.inventory import load_inventory
    from reprofleet.playbook import load_playbook
    from reprofleet.runner.recovery import recovery_factory

    for host in search_fleet.hosts:
        reset_host(host, host.paths.hw / "attempts.json")
    book = load_playbook(_book(tmp_path / "book", BISECT))
    started = time.monotonic()
    plan = make_plan(book, load_inventory(search_fleet.inventory_path).hosts)
    result = run_campaign(plan, settings_for(search_fleet), tmp_path / "reports", recovery_factory=recovery_factory)
    print(f"bisection: {time.monotonic() - started:.1f} s, {len(result.records)} attempts")
    (done,) = _done(result.directory.root)
    outcome = done["result"]
    assert (outcome["first_good"], outcome["last_bad"]) == (2, 1), outcome
    assert outcome["posterior"] >= 0.95 and outcome["endpoints_ok"] is True and outcome["done"]
    assert outcome["versions"][2]["attempts"] - outcome["versions"][2]["reproductions"] >= 5  # the floor's clean runs
