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

# Seconds per module (setup + call + teardown of all its tests) measured on `make test`'s fleet
# phase, 4 workers on 2 cores beside other work (load 18-22), 2026-12-06. Only their order matters;
# re-measure with `--durations=0` when a module grows or a new long one is added.
MEASURED_S: dict[str, float] = {
    "test_fleet_kill9.py": 463, "test_fleet_search.py": 216, "test_fleet_tasks.py": 195,
    "test_power_fleet_preflight.py": 177, "test_fleet_liveness_paths.py": 172, "test_fleet_cache.py": 141,
    "test_fleet_campaign.py": 129, "test_fleet_runtime.py": 128, "test_fleet_policy.py": 109,
    "test_fleet_power_safety.py": 106, "test_fleet_json.py": 95, "test_power_fleet_trust.py": 91,
    "test_fleet_demo.py": 89, "test_fleet_wedge.py": 81, "test_fleet_host_debug.py": 75,
    "test_fleet_snmp_quiet.py": 74, "test_fleet_docker.py": 72, "test_fleet_power_loss.py": 111,
    "test_fleet_bmc_events.py": 56, "test_fleet_status.py": 54, "test_fleet_netconsole.py": 50,
    "test_sim_poc.py": 44, "test_fleet_orderly_reboot.py": 43, "test_power_snmp.py": 39,
}
FLEET = Path(__file__).parent


def fleet_order(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with the fleet modules longest first; within a module, and for the rest, as collected."""
    def weight(item: pytest.Item) -> float:
        return MEASURED_S.get(item.path.name, 0.0) if item.path.parent == FLEET else 0.0

    return sorted(items, key=lambda item: -weight(item))  # stable: the collected order breaks ties


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items[:] = fleet_order(items)
