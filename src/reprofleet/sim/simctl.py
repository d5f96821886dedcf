"""What ``invoke sim.up | sim.status | sim.down`` call: one fleet per sim directory.

The fleet outlives the command that started it (its hardware daemon is detached), so the
sim directory remembers it in ``<sim_dir>/current`` (the run id); ``status`` and ``down``
attach to it from a new process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table

from reprofleet.sim.fleet import Fleet
from reprofleet.sim.procs import SimError
from reprofleet.sim.spec import demo_specs, load_fleet_config
from reprofleet.sim.teardown import sweep_stale


def _pointer(sim_dir: Path) -> Path:
    return sim_dir.resolve() / "current"


def current(sim_dir: Path) -> Fleet | None:
    """The fleet this sim directory started and that is still running, if any."""
    pointer = _pointer(sim_dir)
    if not pointer.exists():
        return None
    fleet_dir = sim_dir.resolve() / pointer.read_text().strip()
    try:
        fleet = Fleet.attach(fleet_dir)
    except SimError:
        return None
    hardware = fleet.manifest.hardware
    return fleet if hardware is not None and hardware.alive() else None


def up(hosts: int, config: str | Path | None, sim_dir: Path, power: str | None = "tasmota") -> Fleet:
    """Start a fleet: the config's hosts (the first ``hosts`` of them), or the demo fleet's.

    ``power``: the simulated smart plug every host hangs on (tasmota | shelly1 | shelly2),
    written into the inventory's ``pdu:`` blocks so a campaign can power-cycle wedged hosts;
    None for no PDU.
    """
    running = current(sim_dir)
    if running is not None:
        raise SimError(f"a simulated fleet is already up ({running.run_id}, {len(running.hosts)} hosts); "
                       "run sim.down first")
    sweep_stale()
    if config is not None:
        specs = load_fleet_config(config)
        if hosts and hosts < len(specs):
            specs = specs[:hosts]
    else:
        specs = demo_specs(hosts or 3)
    base = sim_dir.resolve()
    base.mkdir(parents=True, exist_ok=True)
    fleet = Fleet.up(specs, base_dir=base, outlive_caller=True)
    try:
        if power:
            fleet.attach_plug(power)
    except BaseException:
        fleet.down(remove_files=False)
        raise
    _pointer(sim_dir).write_text(fleet.run_id + "\n")
    return fleet


def status(sim_dir: Path) -> list[dict[str, Any]]:
    fleet = current(sim_dir)
    if fleet is None:
        raise SimError(f"no simulated fleet is up (nothing running from {sim_dir.resolve()})")
    return fleet.status()


def status_table(sim_dir: Path) -> Table:
    rows = status(sim_dir)
    table = Table(title="simulated fleet", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for column in ("host", "address", "power", "boot", "sshd", "clock lock", "limit", "wedge p"):
        table.add_column(column, no_wrap=True)
    for row in rows:
        policy = row["gpu_policy"]
        lock = policy.get("locked_graphics")
        power = row["power"] + (" FROZEN" if row["frozen"] else "") + (" stalled" if row["stalled"] else "")
        table.add_row(
            row["name"], row["address"], power, (row["boot_id"] or "-")[:8], str(row["sshd_pid"] or "-"),
            f"{lock[0]},{lock[1]}" if lock else "default", f"{policy.get('power_limit_w', 0):.0f} W",
            f"{row['p_wedge']:.2f}" if row["susceptible"] else "immune",
        )
    return table


def down(sim_dir: Path) -> None:
    """Tear the current fleet down; without one, still sweep what crashed runs left behind."""
    pointer = _pointer(sim_dir)
    fleet_dir = sim_dir.resolve() / pointer.read_text().strip() if pointer.exists() else None
    if fleet_dir is not None and (fleet_dir / "fleet.json").exists():
        Fleet.attach(fleet_dir).down()
    pointer.unlink(missing_ok=True)
    sweep_stale()
