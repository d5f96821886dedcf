"""The fleet tests' playbook and run settings: a campaign folder with the project's PoC, and
``RunSettings`` with the short dwell, stability, grace and correlated hold the fleet tests use.

Used by the fleet tests and by the unit and seam tests that need a plain campaign folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from reprofleet.liveness.watchdog import WatchdogSettings
from reprofleet.remote.transport import TransportSettings
from reprofleet.runner.host import RunSettings
from tests.support.paths import REPO

POC = REPO / "playbooks" / "poc" / "sm120_hostwedge.py"


def write_playbook(folder: Path, *, attempts: int, attempt_timeout: float = 20, cells: str = "  - name: default\n",
                   extra: str = "", boot: float = 60) -> Path:
    (folder / "poc").mkdir(parents=True, exist_ok=True)
    shutil.copy(POC, folder / "poc" / POC.name)
    path = folder / "book.yml"
    path.write_text(
        "name: fleet-test\n"
        f"poc: {{script: poc/{POC.name}}}\n"
        "runtime: {kind: docker, image: 'vllm/vllm-openai:v{vllm}', docker_args: [--ipc, host]}\n"
        f"attempts: {attempts}\n"
        f"timeouts: {{attempt: {attempt_timeout}, boot: {boot:g}}}\n"
        "defaults:\n  vars: {vllm: '0.25.1'}\n  args: {spec_tokens: 9, gpu_memory_utilization: 0.87}\n"
        f"{extra}"
        "matrix:\n" + cells
    )
    return path


FLEET_TEST_HOLD_S = 3.0


def settings_for(fleet: Any, **overrides: Any) -> RunSettings:
    base = dict(
        transport=TransportSettings(known_hosts=Path(fleet.known_hosts_path)),
        # the fleet tests' hosts freeze together by script (two hosts wedge in one round): a
        # short correlated-silence hold, so they are declared in seconds, not 300 s; the hold
        # itself is tested with its own values (test_fleet_power_safety, test_fleet_liveness)
        watchdog=WatchdogSettings(correlated_hold_s=FLEET_TEST_HOLD_S),
        controller="pytest",
        sample_hz=5.0,
        dwell_s=1.0,
        stability_s=1.0,
        reboot_grace_s=1.0,
    )
    base.update(overrides)
    return RunSettings(**base)
