"""The fleet modules in the order ``make test`` hands them to its workers: longest first.

``--dist loadfile`` gives each worker a whole module, taking them in collection order (the
Makefile passes ``--no-loadscope-reorder``: xdist's own reorder sorts by the number of tests,
which sent the two-test search module and the four-test kill -9 module, the longest, out last).
Handing the longest out first (longest-processing-time-first scheduling) lets the short ones
fill the gaps, so the four workers end close together instead of one running a long module
while the others sit idle. Only the order changes: every test still runs, on one worker per
module. A module missing from the table keeps its place after the listed ones.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# Seconds per module (setup + call + teardown of all its tests, from `--durations=0`): the mean of
# two runs of this phase, 4 workers on 2 cores beside other work (load 15-22), 2026-12-06/07; the
# power-loss module from the second run only (its fake vLLM was made faster between them). Only
# their order matters; re-measure when a module grows or a long one is added.
MEASURED_S: dict[str, float] = {
    "test_fleet_slurm.py": 90,  # new, not measured in those runs: 57-64 s alone at load 6-11, 112 s at load 27
    "test_fleet_slurm_shards.py": 60,  # new, not measured in those runs: 38-44 s alone at load 4-6, 57 s at load 8
    "test_fleet_kill9.py": 476, "test_fleet_search.py": 246, "test_fleet_tasks.py": 198,
    "test_power_fleet_preflight.py": 179, "test_fleet_liveness_paths.py": 169, "test_fleet_cache.py": 145,
    "test_fleet_runtime.py": 128, "test_fleet_campaign.py": 132, "test_fleet_policy.py": 118,
    "test_fleet_json.py": 117, "test_fleet_power_safety.py": 107, "test_power_fleet_trust.py": 100,
    "test_fleet_demo.py": 89, "test_fleet_wedge.py": 84, "test_fleet_snmp_quiet.py": 78, "test_fleet_docker.py": 90,
    "test_fleet_host_debug.py": 72, "test_fleet_power_loss.py": 63, "test_fleet_status.py": 63,
    "test_fleet_bmc_events.py": 56, "test_fleet_netconsole.py": 48, "test_sim_poc.py": 45, "test_power_snmp.py": 44,
    "test_fleet_orderly_reboot.py": 41,
    "test_power_verify.py": 70,  # not measured in those runs: its doctor --cycle test took 32 s alone on a quiet machine
    "test_fleet_consumer_plugs.py": 80,  # not measured in those runs: 64 s alone with the machine at load 9
    "test_fleet_fence_nmi.py": 85,  # new, not measured in those runs: 90 s alone with the machine at load 9
    # every module's hosts run a real dockerd since issue 36 item 4 (these were measured with rfsim's
    # model of docker on most hosts); the whole phase took 458 s with the real daemons against 477 s
    # with the model, so the order holds
}
FLEET = Path(__file__).parent


def fleet_order(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with the fleet modules longest first; within a module, and for the rest, as collected."""
    def weight(item: pytest.Item) -> float:
        return MEASURED_S.get(item.path.name, 0.0) if item.path.parent == FLEET else 0.0

    return sorted(items, key=lambda item: -weight(item))  # stable: the collected order breaks ties


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items[:] = fleet_order(items)
