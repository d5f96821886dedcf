"""Tearing a simulated fleet down, and sweeping what crashed runs left behind.

Every kernel object of a run is named ``rfs<run>-<i>`` (netns, veth, cgroup) or
``rfs<run>-br`` (bridge) and ``rfs<run>-up`` (the bridge's always-up uplink), and the run is registered in /run/reprofleet-sim/<run>.json with
the process that owns it (the fleet's hardware daemon, or the process still building it).
A run whose owner is dead is stale; its objects are removed by name, its processes by PID.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
from pathlib import Path

from reprofleet.sim import dockerd, netns
from reprofleet.sim.cgroup import CpuGroup, FreezerGroup, groups_with_prefix
from reprofleet.sim.layout import PREFIX, REGISTRY_DIR, registry_entry
from reprofleet.sim.procs import ProcessRef

NAME_RE = r"^{prefix}([0-9a-f]{{4,6}})-(\d+|br|up|uq)$"


def register(run_id: str, owner: ProcessRef, fleet_dir: Path) -> None:
    REGISTRY_DIR.mkdir(parents=True, exist_ok=True)
    path = registry_entry(run_id)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"run_id": run_id, "fleet_dir": str(fleet_dir), "owner": owner.as_json()}))
    os.replace(tmp, path)


def registered_owner(run_id: str) -> tuple[ProcessRef | None, Path | None]:
    try:
        data = json.loads(registry_entry(run_id).read_text())
    except (OSError, ValueError):
        return None, None
    return ProcessRef.from_json(data["owner"]), Path(data["fleet_dir"])


def run_objects(run_id: str, prefix: str = PREFIX) -> dict[str, list[str]]:
    """Every netns, link and cgroup whose name says it belongs to ``run_id``."""
    pattern = re.compile(NAME_RE.format(prefix=re.escape(prefix)))

    def mine(name: str) -> bool:
        match = pattern.match(name)
        return bool(match and match.group(1) == run_id)

    return {
        "netns": sorted(n for n in netns.netns_names() if mine(n)),
        "links": sorted(n for n in netns.link_names() if mine(n)),
        "cgroups": [n for n in groups_with_prefix(prefix + run_id + "-") if mine(n)],
    }


def known_runs(prefix: str = PREFIX) -> set[str]:
    pattern = re.compile(NAME_RE.format(prefix=re.escape(prefix)))
    names = netns.netns_names() | netns.link_names() | set(groups_with_prefix(prefix))
    runs = {m.group(1) for m in map(pattern.match, names) if m}
    if REGISTRY_DIR.is_dir():
        runs |= {p.stem for p in REGISTRY_DIR.glob("*.json") if re.fullmatch(r"[0-9a-f]{4,6}", p.stem)}
    return runs


def teardown(run_id: str, *, hardware: ProcessRef | None, fleet_dir: Path | None,
             remove_files: bool, prefix: str = PREFIX) -> None:
    """Kill every host process, stop the daemon, delete netns/links/cgroups, wait, unregister.

    Hosts die first so that the daemon, their parent and subreaper, reaps them.
    """
    _stop_power_simulators(fleet_dir)
    _stop_slurm(fleet_dir)
    objects = run_objects(run_id, prefix)
    for name in objects["cgroups"]:
        FreezerGroup(name).kill_all()
    if hardware is not None:
        hardware.stop()
    for name in objects["cgroups"]:
        FreezerGroup(name).remove()  # and its containers' groups in every controller
        CpuGroup(name).remove()  # a starved host's cpu group, if a test left one
        dockerd.remove_exec_root(name)
    for name in objects["netns"]:
        for pid in netns.netns_pids(name):  # stragglers not in a cgroup (ip netns exec ...)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        netns.delete_netns(name)
    for name in objects["links"]:
        netns.delete_link(name)
    netns.wait_links_gone(objects["links"])
    if fleet_dir is not None:
        dockerd.unmount_data(fleet_dir)  # the hosts' docker data roots (tmpfs)
    registry_entry(run_id).unlink(missing_ok=True)
    if remove_files and fleet_dir is not None and (fleet_dir / "fleet.json").exists():
        shutil.rmtree(fleet_dir, ignore_errors=True)


def _stop_power_simulators(fleet_dir: Path | None) -> None:
    """PDU/BMC simulators attached to the fleet live under <fleet>/power/<name>/."""
    folder = fleet_dir / "power" if fleet_dir is not None else None
    if folder is None or not folder.is_dir():
        return
    from reprofleet.sim.power import stop_simulator

    for workdir in sorted(p for p in folder.iterdir() if p.is_dir()):
        stop_simulator(workdir)


def _stop_slurm(fleet_dir: Path | None) -> None:
    """A Slurm cluster's controller side (munged, slurmctld) lives under <fleet>/slurm/
    (sim/slurm_cluster.py); its slurmd are host processes, killed with the hosts' cgroups."""
    folder = fleet_dir / "slurm" if fleet_dir is not None else None
    if folder is None or not (folder / "processes.json").is_file():
        return
    from reprofleet.sim.power.daemons import Daemons

    Daemons(folder).stop_all()


def sweep_stale(prefix: str = PREFIX) -> list[str]:
    """Remove leftovers of runs whose owner or hardware daemon is dead; return the run ids removed.

    A fleet whose hardware daemon died is broken even while its owner lives (the daemon is
    every host's parent), so it goes too. A fleet still starting has no daemon recorded
    yet and is judged by its owner alone. Files of a swept run are kept (they are
    evidence); only kernel objects and processes go.
    """
    removed = []
    for run_id in sorted(known_runs(prefix)):
        owner, fleet_dir = registered_owner(run_id)
        hardware = _hardware_of(fleet_dir)
        hardware_died = hardware is not None and not hardware.alive()
        if owner is not None and owner.alive() and not hardware_died:
            continue
        teardown(run_id, hardware=hardware, fleet_dir=fleet_dir, remove_files=False, prefix=prefix)
        removed.append(run_id)
    return removed


def _hardware_of(fleet_dir: Path | None) -> ProcessRef | None:
    if fleet_dir is None:
        return None
    try:
        data = json.loads((fleet_dir / "fleet.json").read_text())
        return ProcessRef.from_json(data["hardware"]) if data.get("hardware") else None
    except (OSError, ValueError, KeyError):
        return None
