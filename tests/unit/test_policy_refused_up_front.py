"""A policy no card can take is refused up front: an out-of-range power limit stops the
campaign with one line naming file:line:field before any host is contacted, whether the range
comes from the facts cache or the inventory. (Restoring policies when the controller is
interrupted is tests/fleet/test_fleet_policy.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.listener import CountingPort
from tests.support.fleet_campaign import write_playbook

LGC_AND_PL = "  - name: lgc-2800\n    graphics_clocks: [180, 2800]\n  - name: pl-700\n    power_limit: 700\n"


def reprofleet(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reprofleet", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def test_an_out_of_range_power_limit_is_refused_before_any_host_is_contacted(tmp_path: Path) -> None:
    # A port that counts connections: contacting the host would show there.
    port = CountingPort()
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(f"all:\n  hosts:\n    ws01:\n      ansible_host: 127.0.0.1\n      ansible_port: {port.port}\n")
    facts_cache = tmp_path / "reports" / ".facts"
    facts_cache.mkdir(parents=True)
    (facts_cache / "ws01.json").write_text(json.dumps(
        {"gpus": [{"index": 0, "power_limit_w": {"min": 150.0, "max": 600.0}}]}))
    book = write_playbook(tmp_path / "book", attempts=1, cells=LGC_AND_PL)
    with port:
        result = reprofleet("campaign", "--hosts", str(inventory), "--playbook", str(book), cwd=tmp_path)
    assert port.connections == 0, "a host was contacted before the playbook was refused"
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "matrix[1].power_limit" in line and "700" in line and "150-600" in line
    assert not list((tmp_path / "reports").glob("*/attempts.jsonl"))


def test_the_inventory_can_give_the_power_limit_range(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[lab]\nws01 ansible_host=10.213.254.254 gpu_power_limits='[150, 600]'\n")
    book = write_playbook(tmp_path / "book", attempts=1, cells=LGC_AND_PL)
    result = reprofleet("campaign", "--hosts", str(inventory), "--playbook", str(book), cwd=tmp_path)
    assert result.returncode == 2 and "matrix[1].power_limit" in result.stderr
