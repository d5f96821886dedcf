"""fleet.json: what one simulated fleet is made of, shared by every process that drives it.

Fleet.up writes it; the hardware daemon, Fleet.attach (``sim.status``/``sim.down`` from
another process) and the stale sweep read it. It names every kernel object of the run, so
that tearing down never has to guess.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from reprofleet.sim.layout import FleetPaths
from reprofleet.sim.procs import ProcessRef, SimError
from reprofleet.sim.spec import SimHostSpec, spec_from_mapping


@dataclass(frozen=True)
class HostRecord:
    """One host's kernel objects and address."""

    name: str
    index: int
    netns: str
    veth: str
    address: str
    cgroup: str
    spec: SimHostSpec


@dataclass(frozen=True)
class FleetManifest:
    run_id: str
    fleet_dir: str
    subnet: str
    gateway: str
    bridge: str
    dist_packages: str
    created: float
    hosts: tuple[HostRecord, ...]
    hardware: ProcessRef | None = None

    @property
    def paths(self) -> FleetPaths:
        return FleetPaths(Path(self.fleet_dir))

    def with_hardware(self, ref: ProcessRef) -> "FleetManifest":
        return replace(self, hardware=ref)

    def host(self, name: str) -> HostRecord:
        for record in self.hosts:
            if record.name == name:
                return record
        raise SimError(f"no host {name!r} in fleet {self.run_id}")


def _host_json(record: HostRecord) -> dict[str, Any]:
    data = asdict(record)
    data["spec"] = record.spec.host_config()
    data["spec"]["seed"] = record.spec.seed
    return data


def save(manifest: FleetManifest) -> None:
    data = asdict(manifest)
    data["hosts"] = [_host_json(h) for h in manifest.hosts]
    data["hardware"] = manifest.hardware.as_json() if manifest.hardware else None
    path = manifest.paths.manifest
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    os.replace(tmp, path)


def load(fleet_dir: str | Path) -> FleetManifest:
    path = FleetPaths(Path(fleet_dir)).manifest
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SimError(f"{path}: not a simulated fleet ({exc})") from exc
    hosts = tuple(
        HostRecord(**{**h, "spec": spec_from_mapping(h["spec"])}) for h in data.pop("hosts")
    )
    hardware = data.pop("hardware")
    return FleetManifest(
        **data, hosts=hosts, hardware=ProcessRef.from_json(hardware) if hardware else None
    )
