"""The simulated fleet's Slurm (sim/slurm_cluster.py) without namespaces: its slurm.conf, the boot
services a host starts, and the fleet's teardown stopping the cluster's daemons by PID."""

from __future__ import annotations

from pathlib import Path

from reprofleet.sim import hostfs
from reprofleet.sim.layout import HostPaths
from reprofleet.sim.power.daemons import Daemons
from reprofleet.sim.slurm_cluster import SlurmNodeLine, slurm_conf_text
from reprofleet.sim.teardown import teardown

DIST = Path("/usr/local/lib/python3.11/dist-packages")


def test_the_clusters_slurm_conf_keeps_every_file_under_its_folder_and_names_each_host_at_its_address(
        tmp_path: Path) -> None:
    root = tmp_path / "slurm"
    text = slurm_conf_text(root, "rfsab12", "vm", "10.1.2.1", 40123,
                           [SlurmNodeLine("busy", "10.1.2.10"), SlurmNodeLine("wedgy", "10.1.2.11")], "gpu")
    conf = dict(line.split("=", 1) for line in text.splitlines() if not line.startswith(("NodeName", "PartitionName")))
    assert conf["SlurmctldHost"] == "vm(10.1.2.1)" and conf["SlurmctldPort"] == "40123"
    for key in ("StateSaveLocation", "SlurmdSpoolDir", "SlurmctldPidFile", "SlurmdPidFile", "SlurmctldLogFile",
                "SlurmdLogFile"):
        assert conf[key].startswith(f"{root}/"), key
    assert conf["AuthInfo"] == f"socket={root}/munge/munge.socket"
    assert conf["ReturnToService"] == "1" and conf["SlurmdTimeout"] == "300"
    assert "NodeName=busy NodeAddr=10.1.2.10 " in text and "NodeName=wedgy NodeAddr=10.1.2.11 " in text
    assert "PartitionName=gpu Nodes=busy,wedgy " in text


def test_a_hosts_boot_starts_its_services_in_the_background_before_it_becomes_sshd(tmp_path: Path) -> None:
    paths = HostPaths(tmp_path / "h1")
    boot = hostfs.boot_script_text(paths, "h1", DIST).splitlines()
    loop = boot.index(f"for service in {paths.services}/*; do")
    assert boot[loop + 1].strip().endswith("&") and '"$service"' in boot[loop + 1]
    assert loop < next(i for i, line in enumerate(boot) if line.startswith("exec /usr/sbin/sshd"))
    assert loop > max(i for i, line in enumerate(boot) if line.startswith("mount --bind"))  # the host's own view first


def test_the_fleets_teardown_stops_the_clusters_daemons_by_pid(tmp_path: Path) -> None:
    fleet_dir = tmp_path / "fleet"
    (fleet_dir / "slurm").mkdir(parents=True)
    daemons = Daemons(fleet_dir / "slurm")
    slurmctld = daemons.spawn("slurmctld", ["sleep", "120"], env={"PATH": "/usr/bin:/bin"})
    try:
        assert slurmctld.alive()
        teardown("fffff0", hardware=None, fleet_dir=fleet_dir, remove_files=False)
        assert not slurmctld.alive()
    finally:
        slurmctld.stop()
