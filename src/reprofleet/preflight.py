"""Checks that need no host: run before anything is contacted.

Every host's power drivers are built here too (credentials resolved, model and options
checked, no two hosts on one outlet unless marked ``shared``), so ``--dry-run`` finds an
unset credential variable or a mistyped ``model:`` before a campaign starts, not at the
first wedge hours into it. ``power_states_at_start`` is the one check that contacts
something (each PDU/BMC is asked for its state) and is for the campaign's start only.

A power limit outside a card's range would fail on the host after other hosts were already
changed, so it is refused up front from what is known without asking: the inventory's
``gpu_power_limits: [min, max]``, or the facts a previous ``invoke facts`` or campaign
cached under ``reports/.facts/<host>.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping

from .errors import Location, PlaybookError
from .model import Host, Playbook
from .policy import cells_out_of_range
from .power import PowerLog, PowerState
from .power.locks import lock_folder
from .power.ports import HostPower, ask_power_states, build_host_power
from .power.wall import WallLine, WallPowerSampler

FACTS_CACHE = ".facts"


def cached_facts(report_root: Path, host: str) -> Mapping[str, Any] | None:
    path = report_root / FACTS_CACHE / f"{host}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def cache_facts(report_root: Path, host: str, facts: Mapping[str, Any]) -> None:
    folder = report_root / FACTS_CACHE
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{host}.json").write_text(json.dumps(dict(facts), sort_keys=True, default=str) + "\n")


def check_playbook_against_hosts(playbook: Playbook, hosts: tuple[Host, ...], report_root: Path) -> None:
    """Raise PlaybookError (file:cell:field) for the first cell no host's card can take,
    and PowerPreflightError (one line per host and inventory line) for power ports that
    cannot work. Contacts nothing."""
    check_power(hosts, report_root)
    for host in hosts:
        for cell, low, high in cells_out_of_range(playbook, host, cached_facts(report_root, host.name)):
            raise PlaybookError(
                Location(playbook.path, None, f"matrix[{cell.index}].power_limit"),
                f"cell {cell.name!r} asks {cell.gpu.power_limit_w:g} W, but {host.name}'s GPU takes {low:g}-{high:g} W",
            )


def check_power(hosts: tuple[Host, ...], report_root: Path, log: PowerLog | None = None) -> dict[str, HostPower]:
    """Build every host's power drivers without contacting anything; raise on any problem."""
    return dict(build_host_power(hosts, log, lock_dir=lock_folder(report_root)))


def power_states_at_start(hosts: tuple[Host, ...], report_root: Path,
                          log: PowerLog | None = None) -> dict[str, tuple[PowerState, ...]]:
    """Campaign start (never ``--dry-run``): every PDU/BMC must answer; an outlet that is off is named."""
    return ask_power_states(check_power(hosts, report_root, log))


def wall_sampler(host: Host, report_root: Path, write: Callable[[WallLine], None],
                 period_s: float = 1.0) -> WallPowerSampler:
    """A 1 Hz wall-power sampler for one host's attempts (does nothing where no outlet meters power).

    ``write`` gets ``{"t", "k": "wall", "w", "source"}`` lines (the attempt's stream);
    ``summary()`` after a wedge gives the last readings for its record.
    """
    power = build_host_power([host], lock_dir=lock_folder(report_root)).get(host.name)
    return WallPowerSampler(power.drivers if power else (), write, period_s=period_s)
