"""A simulated host's tree with its sudo broker listening: the ``sudo_host`` fixture, for the
tests of the simulated sudo and of what runs through it (nvidia-bug-report.sh). Registered
once in tests/conftest.py.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any, Callable, Iterator

import pytest

from reprofleet.sim.spec import SimHostSpec


@pytest.fixture
def sudo_host(sim_host_tree: Callable[..., Any]) -> Iterator[Callable[[str], Any]]:
    """``sudo_host(rule) -> tree``: a host tree with its broker listening (stopped after the test)."""
    brokers: list[subprocess.Popen[bytes]] = []

    def make(rule: str) -> Any:
        tree = sim_host_tree(SimHostSpec("unit", time_scale=0.001, login_user="lab", sudo=rule))
        ready = tree.root / "broker.ready"
        broker = subprocess.Popen([sys.executable, "-m", "rfsim.sudo_broker", "--secure-path",
                                   f"{tree.bin}:/usr/bin:/bin", "--ready", str(ready),
                                   "--env-keep", "PYTHONPATH,RFSIM_ETC"], env=tree.env(),
                                  stdin=subprocess.DEVNULL)
        brokers.append(broker)
        deadline = time.monotonic() + 10
        while not ready.exists():
            assert broker.poll() is None and time.monotonic() < deadline, "the broker did not start"
            time.sleep(0.01)
        return tree

    yield make
    for broker in brokers:
        broker.kill()
        broker.wait()
