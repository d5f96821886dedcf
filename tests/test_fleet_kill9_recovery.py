"""The kill -9 chain of a wedge's recovery (tests/test_fleet_kill9.py explains the harness):
killed in the reboot grace, with a host frozen while no controller watched, with the outlet
off, while booting and during forensics, each resume killed at the next point.

A module of its own so that make test runs it beside the other chain (each module builds
its own fleet and its own uninterrupted reference run).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from test_fleet_kill9 import RECOVERY_CHAIN, KillFleet, Reference, _run_chain
from test_fleet_kill9 import kill_fleet, reference  # noqa: F401  (module fixtures: a fleet and a reference of its own)


@pytest.mark.fleet
def test_a_campaign_killed_at_each_step_of_a_wedge_recovery_in_turn_ends_as_an_uninterrupted_one(
        kill_fleet: KillFleet, reference: Reference, tmp_path: Path) -> None:
    _run_chain(kill_fleet, reference, tmp_path, RECOVERY_CHAIN)
