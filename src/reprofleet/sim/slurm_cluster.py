"""A real Slurm in the simulated fleet: ``munged`` and ``slurmctld`` on the controller's side, a
``slurmd`` on every simulated host.

    cluster = SlurmClusterSetup(partition="gpu")
    fleet = Fleet.up(specs, before_boot=cluster.start)   # slurm.conf, munged, slurmctld, services
    lab = cluster.cluster                                 # SlurmCluster: env(), run(), nodes()
    lab.wait_nodes(lambda node: node["state"] == "idle", "every slurmd registered")
    fleet.down()                                          # stops munged and slurmctld too

Each host's slurmd is one of its boot services (``<host>/services/slurmd``, started by boot.sh):
it runs in the host's network namespace at the host's address, under the host's hostname (its
UTS namespace: the Slurm node name), and in the host's freezer cgroup, so a frozen host's slurmd
stops answering, a power cut kills it and the next boot starts it again, as on a real node.

Everything is private to the fleet (``<fleet>/slurm/``): the cluster's name, slurm.conf, munge's
key and socket, state, spool, logs and pid files, and a slurmctld port picked free at start;
the daemons are recorded by PID and start time (``processes.json``), so ``fleet.down()`` and the
stale sweep stop them (sim/teardown.py), never by name. Debian 12's packages (``slurmctld
slurmd munge slurm-client``, Slurm 22.05); run as root. A job of a user other than root needs
the fleet's folder traversable (0711): the user's ``sbatch`` reads slurm.conf and asks munged
on its socket, and slurmstepd runs the job's script from the spool as that user.

Nothing here reads Slurm through reprofleet's own client (``reprofleet.scheduler``): the tests
judge that client against this cluster, so the cluster reads ``sinfo --json`` on its own.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from reprofleet.sim.power.daemons import Daemons, free_port
from reprofleet.sim.procs import SimError

__all__ = ["CONTROL_NODE", "SLURM_TOOLS", "ControlNode", "SlurmCluster", "SlurmClusterSetup", "slurm_conf_text"]

SLURM_TOOLS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "munge", "scontrol", "sinfo", "sbatch")
DAEMON_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
START_TIMEOUT_S = 20.0
COMMAND_TIMEOUT_S = 15.0
SLURMD_PORT = 6818  # every slurmd in its own network namespace: one port for all
# slurmd's cgroup plugin, named: its autodetection wants a systemd cgroup hierarchy a simulated
# host does not have (_write_slurmd_service)
CGROUP_CONF = "CgroupPlugin=cgroup/v1\n"
SLURMD_TIMEOUT_S = 300  # Slurm's default: a silent node is Slurm's own DOWN only after this
CONTROL_NODE = "rfctl"  # the controllers' node, beside slurmctld (SlurmClusterSetup.control_partition)
CONTROL_CPUS = 4  # controller jobs run side by side on it (one CPU each: CR_Core)


@dataclass(frozen=True)
class ControlNode:
    """A Slurm node in the machine's own network namespace, for jobs that must run the
    controller (its Python, the repository) and reach the simulated hosts over SSH: the
    controller shards of ``invoke campaign --shards``. Its slurmd listens on a port of its own
    (the simulated hosts' slurmd each have a namespace to themselves; this one shares the
    machine's) and is named with ``slurmd -N``, not by the machine's hostname."""

    partition: str
    address: str
    port: int
    name: str = CONTROL_NODE


@dataclass(frozen=True)
class SlurmNodeLine:
    """One simulated host as slurm.conf names it."""

    name: str  # the host's hostname: slurmd finds its NodeName by it
    address: str


def slurm_conf_text(root: Path, cluster: str, controller: str, controller_address: str, port: int,
                    nodes: Sequence[SlurmNodeLine], partition: str, control: ControlNode | None = None) -> str:
    """A cluster's slurm.conf, every path under ``root``. ``proctrack/linuxproc`` and
    ``task/none``: no cgroup of Slurm's own (the hosts' freezer cgroups are the simulator's).
    ``ReturnToService=1``: a node an operator (or a campaign) set down stays down when its
    slurmd registers again after a power cycle; only one Slurm itself found silent returns."""
    lines = [
        f"ClusterName={cluster}",
        f"SlurmctldHost={controller}({controller_address})",
        f"SlurmctldPort={port}",
        f"SlurmdPort={SLURMD_PORT}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root / 'munge' / 'munge.socket'}",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool' / '%n'}",
        f"SlurmctldPidFile={root / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'run' / 'slurmd-%n.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'log' / 'slurmd-%n.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "ReturnToService=1",
        "MpiDefault=none",
        "SlurmdParameters=config_overrides",  # one CPU each, whatever the machine has
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        f"SlurmdTimeout={SLURMD_TIMEOUT_S}",
        "TCPTimeout=2",
        "MessageTimeout=5",
    ]
    lines += [f"NodeName={node.name} NodeAddr={node.address} CPUs=1 RealMemory=100 Features=simulated State=UNKNOWN"
              for node in nodes]
    lines.append(f"PartitionName={partition} Nodes={','.join(n.name for n in nodes)} Default=YES "
                 "MaxTime=INFINITE State=UP")
    if control is not None:
        lines += [f"NodeName={control.name} NodeAddr={control.address} Port={control.port} CPUs={CONTROL_CPUS} "
                  "RealMemory=100 State=UNKNOWN",
                  f"PartitionName={control.partition} Nodes={control.name} MaxTime=INFINITE State=UP"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class SlurmCluster:
    """A running cluster: where its files are, and Slurm's commands pointed at it."""

    root: Path
    name: str
    conf: Path
    port: int

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge" / "munge.socket"

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """This environment with ``SLURM_CONF`` naming the cluster's slurm.conf."""
        return {**os.environ, "SLURM_CONF": str(self.conf), **(extra or {})}

    def run(self, argv: Sequence[str], *, user: str | None = None,
            timeout_s: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """A Slurm command against this cluster, as root or as ``user`` (no shell); never raises
        on its exit status: the caller reads it."""
        try:
            return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False,
                                  stdin=subprocess.DEVNULL, env=self.env(), cwd="/",
                                  user=user, group=user, extra_groups=[] if user else None)
        except subprocess.TimeoutExpired as exc:
            raise SimError(f"{' '.join(argv)}: no answer within {timeout_s:g} s") from exc

    def nodes(self) -> dict[str, dict[str, Any]]:
        """``sinfo --json``'s nodes by name (raw), or SimError with Slurm's words."""
        done = self.run(["sinfo", "--json"])
        try:
            document = json.loads(done.stdout)
        except ValueError:
            raise SimError(f"sinfo --json: rc {done.returncode}: {done.stderr.strip()[:300]}") from None
        if document.get("errors"):
            raise SimError(f"sinfo --json: {document['errors']}")
        return {str(node["name"]): node for node in document.get("nodes", [])}

    def wait_nodes(self, ready: Callable[[dict[str, Any]], bool], what: str, *,
                   names: Sequence[str] | None = None, timeout_s: float = START_TIMEOUT_S) -> dict[str, dict[str, Any]]:
        """Poll ``sinfo --json`` until ``ready`` holds for every node (or ``names``); the nodes then."""
        deadline = time.monotonic() + timeout_s
        seen: dict[str, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            seen = self.nodes()
            chosen = [seen[n] for n in names] if names is not None else list(seen.values())
            if chosen and all(ready(node) for node in chosen):
                return seen
            time.sleep(0.1)
        states = {name: (node.get("state"), node.get("state_flags"), node.get("reason")) for name, node in seen.items()}
        raise SimError(f"timed out after {timeout_s:g} s waiting for {what}: {states}; see {self.root / 'log'}")

    def stop(self) -> None:
        """munged and slurmctld, by PID (the hosts' slurmd go with their hosts)."""
        Daemons(self.root).stop_all()


@dataclass
class SlurmClusterSetup:
    """Builds the cluster when the fleet calls it (``Fleet.up(before_boot=setup.start)``): the
    hosts are known, none is on yet. ``cluster`` is set once it runs."""

    partition: str = "gpu"
    control_partition: str | None = None  # a ControlNode in this partition, started beside slurmctld
    cluster: SlurmCluster | None = field(default=None, init=False)

    def start(self, fleet: Any) -> None:
        """slurm.conf, munged, slurmctld (answering ``scontrol ping``), and each host's slurmd
        service; a daemon that dies or does not answer is a SimError with its log's tail."""
        missing = [tool for tool in SLURM_TOOLS if shutil.which(tool) is None]
        if missing:
            raise SimError(f"missing {', '.join(missing)} (apt: slurmctld slurmd munge slurm-client)")
        root = Path(fleet.fleet_dir) / "slurm"
        for folder in ("munge", "state", "spool", "log", "run"):
            (root / folder).mkdir(parents=True, exist_ok=True, mode=0o755)
        Path(fleet.fleet_dir).chmod(0o711)  # a user's sbatch and job reach slurm.conf, munge and the spool
        port = free_port()
        name = f"rfs{fleet.run_id}"
        conf = root / "slurm.conf"
        nodes = [SlurmNodeLine(host.name, host.address) for host in fleet.hosts]
        control = ControlNode(self.control_partition, "127.0.0.1", free_port()) if self.control_partition else None
        (root / "cgroup.conf").write_text(CGROUP_CONF)  # read from slurm.conf's folder
        conf.write_text(slurm_conf_text(root, name, socket.gethostname().split(".")[0], fleet.manifest.gateway,
                                        port, nodes, self.partition, control))
        cluster = SlurmCluster(root, name, conf, port)
        daemons = Daemons(root)
        _start_munged(daemons, cluster)
        _start_slurmctld(daemons, cluster)
        if control is not None:
            _start_control_slurmd(daemons, cluster, control)
        for host in fleet.hosts:
            (root / "spool" / host.name).mkdir(mode=0o755, exist_ok=True)
            _write_slurmd_service(host.paths.services / "slurmd", conf)
        self.cluster = cluster


def _start_munged(daemons: Daemons, cluster: SlurmCluster) -> None:
    key = cluster.root / "munge" / "munge.key"
    key.touch(mode=0o600)
    key.write_bytes(os.urandom(1024))
    daemons.spawn("munged", ["/usr/sbin/munged", "--foreground", "--force", f"--socket={cluster.munge_socket}",
                             f"--key-file={key}", f"--pid-file={cluster.root / 'run' / 'munged.pid'}",
                             f"--seed-file={cluster.root / 'munge' / 'munged.seed'}",
                             f"--log-file={cluster.root / 'log' / 'munged.log'}"],
                  env={"PATH": DAEMON_PATH, "LANG": "C.UTF-8"})

    def answers() -> bool:
        return cluster.munge_socket.exists() and cluster.run(["munge", "-n", "-S", str(cluster.munge_socket)],
                                                             timeout_s=5).returncode == 0

    daemons.wait_ready("munged", answers, START_TIMEOUT_S, f"munged on {cluster.munge_socket}")


def _start_slurmctld(daemons: Daemons, cluster: SlurmCluster) -> None:
    daemons.spawn("slurmctld", ["/usr/sbin/slurmctld", "-D", "-c", "-f", str(cluster.conf)],
                  env={"PATH": DAEMON_PATH, "LANG": "C.UTF-8", "SLURM_CONF": str(cluster.conf)})

    def answers() -> bool:
        return " is UP" in cluster.run(["scontrol", "ping"], timeout_s=5).stdout

    daemons.wait_ready("slurmctld", answers, START_TIMEOUT_S, f"slurmctld of {cluster.name} on port {cluster.port}")


def _start_control_slurmd(daemons: Daemons, cluster: SlurmCluster, control: ControlNode) -> None:
    """The controllers' slurmd, recorded with munged and slurmctld (stopped with them, by PID).
    In a mount namespace of its own with an empty tmpfs on /sys/fs/cgroup, as each simulated
    host's slurmd (_write_slurmd_service): 22.05's cgroup/v1 plugin wants one there, and the
    machine's own (cgroup v2, or the simulator's freezer) is none of its business. ``unshare``
    and ``sh`` exec in turn, so the recorded PID is slurmd's. Its jobs run from ``/``."""
    (cluster.root / "spool" / control.name).mkdir(mode=0o755, exist_ok=True)
    script = ("mount --make-rprivate / && mount -t tmpfs -o size=64k,mode=755 cgroup /sys/fs/cgroup && cd / && "
              f"exec /usr/sbin/slurmd -D -N {control.name} -f {cluster.conf}")
    daemons.spawn("slurmd-control", ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script],
                  env={"PATH": DAEMON_PATH, "LANG": "C.UTF-8", "SLURM_CONF": str(cluster.conf)})

    def registered() -> bool:
        done = cluster.run(["sinfo", "--noheader", "-n", control.name, "-o", "%t"], timeout_s=5)
        return done.returncode == 0 and done.stdout.strip() in ("idle", "mix", "alloc")

    daemons.wait_ready("slurmd-control", registered, START_TIMEOUT_S, f"slurmd of node {control.name} registered")


def _write_slurmd_service(path: Path, conf: Path) -> None:
    """The host's slurmd unit: in the foreground, so it is the boot's own child in the host's
    cgroup. ``ip netns exec`` gave the host a sysfs of its own, without /sys/fs/cgroup, and
    22.05's slurmd refuses to start unless it finds a cgroup file system there ("No filesystem
    mounted on /sys/fs/cgroup"): an empty tmpfs (cgroup v1's layout) in the host's own mount
    namespace satisfies it; with proctrack/linuxproc and task/none it creates no cgroup. It runs
    from ``/``: boot.sh inherits the hardware daemon's folder, which a job's user may not reach
    (or, under /tmp, the host's own /tmp hides), and slurmstepd then writes "Unable to return to
    working directory" into the job's output."""
    path.write_text("#!/bin/sh\n# slurmd of the fleet's Slurm cluster (sim/slurm_cluster.py)\n"
                    "mountpoint -q /sys/fs/cgroup || mount -t tmpfs -o size=64k,mode=755 cgroup /sys/fs/cgroup\n"
                    "cd /\n"  # systemd's WorkingDirectory: a job's slurmstepd, as its user, returns to it
                    f"exec /usr/sbin/slurmd -D -f {conf}\n")
    path.chmod(0o755)
