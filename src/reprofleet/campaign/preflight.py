"""Checks that need no host: run before anything is contacted.

Every host's power drivers are built here too (credentials resolved, model and options
checked, no two hosts on one outlet unless marked ``shared``), so ``--dry-run`` finds an
unset credential variable or a mistyped ``model:`` before a campaign starts, not at the
first wedge hours into it. ``power_states_at_start`` is the one check that contacts
something (each PDU/BMC is asked for its state) and is for the campaign's start only.

A cell that asks for a GPU setting is refused for an observe-only host (``gpu_policy:
observe``), one line per host and cell, and the campaign runs the others there.

A power limit outside a card's range would fail on the host after other hosts were already
changed, so it is refused up front from what is known without asking: the inventory's
``gpu_power_limits: [min, max]``, or the facts a previous ``invoke facts`` or campaign
cached under ``reports/.facts/<host>.json``.
"""

from __future__ import annotations

from pathlib import Path

from reprofleet.credentials import resolve_env_secrets
from reprofleet.errors import Location, PlaybookError
from reprofleet.inventory import Inventory, load_inventory
from reprofleet.inventory.patterns import play_hosts
from reprofleet.model import Host, Playbook
from reprofleet.runner.gpu_policy import cells_out_of_range, refusals
from reprofleet.power import PowerLog, PowerState
from reprofleet.power.locks import lock_folder
from reprofleet.power.ports import HostPower, ask_power_states, build_host_power
from reprofleet.records.facts_cache import cached_facts


def chosen_hosts(playbook: Playbook, inventory: str, limit: str | None) -> tuple[Inventory, Inventory]:
    """The inventory as read, and the part of it the playbook's ``hosts:`` pattern and then
    ``--limit`` chose (a pattern that chooses nothing is an error naming where it was written)."""
    whole = load_inventory(inventory)
    where = Location(playbook.path, playbook.hosts_line, "hosts") if playbook.hosts else None
    return whole, play_hosts(whole, playbook.hosts, limit, where=where)


def check_playbook_against_hosts(playbook: Playbook, hosts: tuple[Host, ...], report_root: Path) -> None:
    """Raise PlaybookError (file:cell:field) for the first cell no host's card can take,
    and PowerPreflightError (one line per host and inventory line) for power ports that
    cannot work, and CredentialError for an env_secrets value that cannot be read. Contacts nothing."""
    resolve_env_secrets(playbook.env_secrets)  # an unset HF_TOKEN stops the run here, not on a host
    check_power(hosts, report_root)
    for host in hosts:
        for cell, low, high in cells_out_of_range(playbook, host, cached_facts(report_root, host.name)):
            raise PlaybookError(
                Location(playbook.path, None, f"matrix[{cell.index}].power_limit"),
                f"cell {cell.name!r} asks {cell.gpu.power_limit_w:g} W, but {host.name}'s GPU takes {low:g}-{high:g} W",
            )


def observe_only_refusals(playbook: Playbook, hosts: tuple[Host, ...]) -> list[str]:
    """The cells each observe-only host refuses (they ask for a GPU setting), one line per
    host and cell: printed before a campaign starts, and left out of that host's plan."""
    return refusals(playbook, hosts)


def check_power(hosts: tuple[Host, ...], report_root: Path, log: PowerLog | None = None) -> dict[str, HostPower]:
    """Build every host's power drivers without contacting anything; raise on any problem."""
    return dict(build_host_power(hosts, log, lock_dir=lock_folder(report_root)))


def power_states_at_start(hosts: tuple[Host, ...], report_root: Path,
                          log: PowerLog | None = None) -> dict[str, tuple[PowerState, ...]]:
    """Campaign start (never ``--dry-run``): every PDU/BMC must answer; an outlet that is off is named."""
    return ask_power_states(check_power(hosts, report_root, log))

