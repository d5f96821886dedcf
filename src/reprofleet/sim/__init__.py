"""The simulated fleet: real software (OpenSSH, dockerd, iptables, namespaces), fake hardware.

Used by the fleet tests, CI and ``invoke demo``. See fleet.py for the life cycle and
DESIGN.md ("The simulated fleet") for what a simulated host is. A host starts its boot services
(``<host>/services/``) beside sshd; slurm_cluster.py puts a real Slurm on a fleet through them
(munged and slurmctld beside the controller, a slurmd on every host).
"""

from __future__ import annotations

from reprofleet.sim.fleet import Fleet
from reprofleet.sim.host import SimHost
from reprofleet.sim.procs import SimError
from reprofleet.sim.spec import (
    FleetConfigError,
    SimHostSpec,
    demo_config_path,
    demo_specs,
    load_fleet_config,
)
from reprofleet.sim.teardown import sweep_stale

__all__ = [
    "Fleet",
    "FleetConfigError",
    "SimError",
    "SimHost",
    "SimHostSpec",
    "demo_config_path",
    "demo_specs",
    "load_fleet_config",
    "sweep_stale",
]
