"""A simulated fleet with a real Slurm (sim/slurm_cluster.py), a Tasmota plug under every host,
a user's job submitted as ``slurmtest``, and a watcher that records every change Slurm shows
of its nodes, with the time it was seen.

    with slurm_fleet(specs, partition="gpu") as lab:       # every node registered and idle
        job = lab.submit_job("busy", seconds=8)            # returns once the job's script runs
        with SlurmWatch(lab.cluster) as watch: ...         # watch.changes: what Slurm showed, when

Used by the fleet tests of Slurm; everything is stopped by PID when the block ends (the fleet's
teardown stops munged and slurmctld; each slurmd dies with its host).
"""

from __future__ import annotations

import pwd
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from reprofleet.sim import Fleet, SimHostSpec
from reprofleet.sim.procs import SimError, wait_until
from reprofleet.sim.slurm_cluster import SlurmCluster, SlurmClusterSetup

USER = "slurmtest"  # neither operator nor administrator (tests/fixtures/slurm/README.md); the Makefile adds it
WATCH_INTERVAL_S = 0.2
WATCH_LIMIT_S = 600.0  # a watcher left running by a failed test stops by itself


@dataclass(frozen=True)
class NodeSeen:
    """One state of one node as ``sinfo --json`` showed it, first seen at ``t`` (epoch seconds)."""

    t: float
    node: str
    state: str
    flags: tuple[str, ...]
    reason: str
    reason_set: int  # Slurm's own stamp of when the reason was set (epoch seconds, whole): no watcher lag
    slurmd_started: int

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.flags


@dataclass(frozen=True)
class UserJob:
    """A job a user submitted: its id, and its output file as the controller's side sees it."""

    job_id: str
    node: str
    output: Path

    def times(self) -> list[float]:
        """The epoch seconds its script printed: when it started and (once it ended) when it ended."""
        return [float(word) for word in self.output.read_text().split()]


@dataclass(frozen=True)
class SlurmLab:
    fleet: Fleet
    cluster: SlurmCluster
    plug: Any

    def submit_job(self, node: str, seconds: float, timeout_s: float = 30.0) -> UserJob:
        """``sbatch -w NODE`` as the user: a script that prints the time, sleeps, prints it again.
        Returns once the first time is in its output (the job runs on the node)."""
        name = "userjob"
        try:
            pwd.getpwnam(USER)
        except KeyError:
            raise SimError(f"no user {USER} on this machine (`make system-deps` adds it)") from None
        done = self.cluster.run(["sbatch", "--parsable", "-w", node, "-J", name, "-o", f"/tmp/{name}-%j.out",
                                 "--chdir=/tmp", "--wrap", f"date +%s.%N; sleep {seconds:g}; date +%s.%N"], user=USER)
        if done.returncode != 0:
            raise SimError(f"sbatch as {USER}: {done.stderr.strip()}")
        job_id = done.stdout.strip().split(";")[0]
        output = self.fleet.host(node).paths.fs("tmp") / f"{name}-{job_id}.out"  # the host's own /tmp
        job = UserJob(job_id, node, output)
        wait_until(lambda: output.exists() and len(job.times()) >= 1, timeout_s, f"job {job_id} to run on {node}",
                   interval_s=0.1)
        return job


@contextmanager
def slurm_fleet(specs: Sequence[SimHostSpec], partition: str = "gpu", *,
                keep_files: Callable[[], bool] = lambda: False,
                control_partition: str | None = None) -> Iterator[SlurmLab]:
    """The fleet up with its cluster, every host on a Tasmota plug, every node idle; all down
    after (its files kept as evidence when ``keep_files()`` says so at the end).
    ``control_partition``: a node for controller jobs too, beside slurmctld (sim/slurm_cluster.py)."""
    setup = SlurmClusterSetup(partition, control_partition)
    fleet = Fleet.up(specs, before_boot=setup.start)
    broke = False
    try:
        assert setup.cluster is not None
        plug = fleet.attach_plug("tasmota")
        setup.cluster.wait_nodes(lambda node: node["state"] == "idle" and not node.get("state_flags"),
                                 "every slurmd registered and idle")
        yield SlurmLab(fleet, setup.cluster, plug)
    except BaseException:
        broke = True  # a fixture that failed before its tests ran: its files are the evidence
        raise
    finally:
        fleet.down(remove_files=not (broke or keep_files()))
        if broke or keep_files():
            print(f"simulated fleet files kept for inspection: {fleet.fleet_dir}")


class SlurmWatch:
    """A thread that polls ``sinfo --json`` and keeps each node's changes (state, flags, reason,
    slurmd's start), so a test reads what Slurm showed and when, not what the campaign says it did."""

    def __init__(self, cluster: SlurmCluster) -> None:
        self.cluster = cluster
        self.changes: list[NodeSeen] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slurm-watch", daemon=True)

    def __enter__(self) -> SlurmWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10.0)

    def _run(self) -> None:
        last: dict[str, tuple[Any, ...]] = {}
        deadline = time.monotonic() + WATCH_LIMIT_S
        while not self._stop.is_set() and time.monotonic() < deadline:
            self.poll(last)
            self._stop.wait(WATCH_INTERVAL_S)
        self.poll(last)  # the state the campaign left

    def poll(self, last: dict[str, tuple[Any, ...]]) -> None:
        try:
            nodes = self.cluster.nodes()
        except SimError as exc:
            self.errors.append(str(exc))
            return
        now = time.time()
        for name, node in nodes.items():
            seen = NodeSeen(now, name, str(node.get("state", "")), tuple(sorted(node.get("state_flags") or ())),
                            str(node.get("reason") or ""), int(node.get("reason_changed_at") or 0),
                            int(node.get("slurmd_start_time") or 0))
            key = (seen.state, seen.flags, seen.reason, seen.slurmd_started)
            if last.get(name) != key:
                last[name] = key
                self.changes.append(seen)

    def of(self, node: str) -> list[NodeSeen]:
        return [seen for seen in self.changes if seen.node == node]
