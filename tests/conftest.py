"""Shared fixtures. ``sim_fleet`` builds simulated fleets (real sshd in namespaces; root).

    @pytest.mark.fleet
    def test_something(sim_fleet):
        fleet = sim_fleet(2)                                  # two default hosts
        fleet = sim_fleet([SimHostSpec("ws01", script=("wedge",))])
        fleet.write_inventory(tmp_path / "inv.yml", hosts=["ws01"])   # a subset

Every fleet a test builds is torn down after it, pass or fail (a failed test's fleet keeps
its files under /var/lib/reprofleet-sim/<run>/ as evidence; its processes and kernel objects
still go). Leftovers of crashed earlier runs are swept once per session first.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence, Union

import pytest

# Fixtures and hooks of tests/support/ that several test modules use, registered once here (a
# module-scoped fixture is still built once per module that uses it); those of other helpers'
# simulators are registered when their module exists.
pytest_plugins = ["tests.support.fleet_guard", "tests.support.sim_sudo", "tests.support.agent_runs"] + [
    f"tests.support.{name}" for name in ("conftest_power", "hostile_counts")
    if (Path(__file__).parent / "support" / f"{name}.py").exists()]

SpecsArg = Union[int, Sequence[Any], None]

# Every report a test writes is audited (issue 33 item 9): report/write.py re-checks each claim
# against the raw records with the auditor (src/reprofleet/audit/), and a contradiction raises
# ContradictedReport in the test that wrote it. Set here, at import, so the CLI's subprocesses
# inherit it too; REPROFLEET_AUDIT=0 in the environment turns it off for a run.
os.environ.setdefault("REPROFLEET_AUDIT", "1")
_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Remember whether the test body failed, so fixtures can keep evidence."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when == "call":
        item.stash[_FAILED] = report.failed


@pytest.fixture(autouse=True)
def _attempt_records_match_their_schema(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a fleet or seam test (the real controller writing), every attempts.jsonl line under its
    tmp_path must match docs/schema/records/attempt.schema.json (tests/support/record_schema.py).
    Unit tests are left out: many write odd records on purpose to test the readers."""
    yield
    tmp_path = getattr(request.node, "funcargs", {}).get("tmp_path")  # its folder outlives the fixture
    if request.node.path.parent.name not in ("fleet", "seam") or not isinstance(tmp_path, Path):
        return
    from tests.support.record_schema import invalid_lines

    bad = list(invalid_lines(tmp_path))
    assert not bad, "attempt records the published schema refuses:\n" + "\n".join(bad[:10])


@pytest.fixture(scope="session")
def sim_ready() -> None:
    """Skip unless the simulated fleet can run here; sweep earlier runs' leftovers once."""
    if os.geteuid() != 0:
        pytest.skip("the simulated fleet needs root (network namespaces, cgroups, iptables)")
    from reprofleet.sim import sweep_stale

    swept = sweep_stale()
    if swept:
        print(f"swept stale simulated fleets: {', '.join(swept)}")


def _specs(arg: SpecsArg) -> tuple[Any, ...]:
    from reprofleet.sim import SimHostSpec
    from reprofleet.sim.spec import spec_from_mapping

    if arg is None:
        arg = 2
    if isinstance(arg, int):
        return tuple(SimHostSpec(f"sim{i}") for i in range(arg))
    return tuple(spec_from_mapping(s) if isinstance(s, Mapping) else s for s in arg)


@pytest.fixture
def sim_fleet(sim_ready: None, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Factory: ``sim_fleet(specs=2, **Fleet.up kwargs) -> Fleet``; always torn down."""
    from reprofleet.sim import Fleet

    fleets: list[Fleet] = []

    def factory(specs: SpecsArg = None, **kwargs: Any) -> Fleet:
        fleet = Fleet.up(_specs(specs), **kwargs)
        fleets.append(fleet)
        return fleet

    yield factory
    failed = request.node.stash.get(_FAILED, True)
    for fleet in fleets:
        fleet.down(remove_files=not failed)
        if failed:
            print(f"simulated fleet files kept for inspection: {fleet.fleet_dir}")


@pytest.fixture
def sim_inventory(tmp_path: Path) -> Callable[..., Path]:
    """``sim_inventory(fleet, hosts=None, pdu=None) -> Path``: an inventory for some hosts."""

    def write(fleet: Any, hosts: Sequence[str] | None = None,
              pdu: Mapping[str, Mapping[str, Any]] | None = None) -> Path:
        path = tmp_path / f"inventory-{fleet.run_id}-{len(list(tmp_path.iterdir()))}.yml"
        return fleet.write_inventory(path, hosts=hosts, pdu=pdu)

    return write


UNIT_DOCKER = ("#!/usr/bin/python3\n\"\"\"docker in a unit test's host tree: rfsim's model of it.\"\"\"\n"
               "import sys\n\nfrom rfsim.docker_cli import main\n\nsys.exit(main(sys.argv[1:]))\n")


class SimHostTree:
    """A simulated host's fake tools and hardware files in a temporary directory, without
    namespaces: for unit tests of nvidia-smi, pynvml, docker, journalctl and the fake vLLM.

    The directory is world-readable so that a tool can also be run as an unprivileged user.
    """

    def __init__(self, root: Path, spec: Any) -> None:
        from reprofleet.sim.hostfs import install_tools
        from reprofleet.sim.rfsim import gpu, hwio

        self.root = root
        self.bin = root / "bin"
        self.dist = root / "dist-packages"
        self.etc = root / "etc"
        self.hw = self.etc / "hw"
        self.home = root / "home"
        for folder in (self.hw / "requests", self.hw / "boots", self.home):
            folder.mkdir(parents=True, exist_ok=True)
        install_tools(self.bin, self.dist)
        # a fleet host's docker is the real one (sim/dockerd.py); unit trees keep the model of it
        (self.bin / "docker").write_text(UNIT_DOCKER)
        hwio.write_json(self.etc / "host.json", spec.host_config())
        hwio.write_json(self.hw / "gpu0.json", gpu.initial_state(spec.name))
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() or path.parent == self.bin else 0o644)

    def env(self, **extra: str) -> dict[str, str]:
        return {"PATH": f"{self.bin}:/usr/bin:/bin", "PYTHONPATH": str(self.dist), "RFSIM_ETC": str(self.etc),
                "RFSIM_DOCKER_ROOT": str(self.root / "docker"), "HOME": str(self.home), "LANG": "C.UTF-8", **extra}

    def run(self, argv: Sequence[str], *, timeout_s: float = 30.0, user: str | None = None,
            **extra: str) -> Any:
        """Run a tool (a name in bin/ or any command) with this tree as the host."""
        import subprocess

        command = list(argv)
        if (self.bin / command[0]).exists():
            command = ["/usr/bin/python3", str(self.bin / command[0]), *command[1:]]
        if user is not None:
            command = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *command]
        return subprocess.run(command, env=self.env(**extra), capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL, check=False)


@pytest.fixture
def sim_host_tree() -> Iterator[Callable[..., SimHostTree]]:
    """Factory: ``sim_host_tree(spec=None) -> SimHostTree`` (removed after the test)."""
    import shutil
    import tempfile

    from reprofleet.sim import SimHostSpec

    roots: list[Path] = []

    def make(spec: Any = None) -> SimHostTree:
        root = Path(tempfile.mkdtemp(prefix="rfsim-unit-"))
        roots.append(root)
        return SimHostTree(root, spec or SimHostSpec("unit", time_scale=0.001))

    yield make
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)
