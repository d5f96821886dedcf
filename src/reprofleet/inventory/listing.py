"""Any other inventory source (a folder, a dynamic script, a plugin config) via ``ansible-inventory``.

Only Ansible can run its plugins and scripts, so we run ``ansible-inventory --list``
(bounded by a timeout, in its own session so a hung script dies with it) and read its
JSON: variables come already merged, group membership does not.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from reprofleet.credentials import child_environment
from reprofleet.errors import InventoryError, Location
from reprofleet.model import frozen_mapping

from reprofleet.inventory.graph import check_name
from reprofleet.inventory.hosts import Inventory, host_from_vars
from reprofleet.inventory.order import group_hosts
from reprofleet.inventory.values import Sourced, VaultEncrypted

ANSIBLE_INVENTORY_TIMEOUT_S = 60.0


def ansible_inventory_command() -> str | None:
    """``ansible-inventory`` on PATH, or beside this interpreter (an unactivated venv)."""
    found = shutil.which("ansible-inventory")
    if found:
        return found
    beside = Path(sys.executable).parent / "ansible-inventory"
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def ansible_list(source: str, timeout_s: float) -> Any:
    command = ansible_inventory_command()
    if command is None:
        raise InventoryError(
            Location(source),
            "a plugin config, script or folder needs ansible-inventory (pip install ansible-core)",
        )
    # A dynamic inventory script inherits no credential a playbook or inventory named so far.
    env = child_environment(dict(ANSIBLE_INVENTORY_UNPARSED_FAILED="1", ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED="1",
                                 ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    process = subprocess.Popen(
        [command, "-i", source, "--list"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # its own session: takes the script along
        process.communicate()
        raise InventoryError(Location(source), f"ansible-inventory gave no answer within {timeout_s:g}s") from None
    if process.returncode != 0:
        tail = " ".join(stderr.strip().splitlines()[-3:])
        raise InventoryError(Location(source), f"ansible-inventory failed ({process.returncode}): {tail}")
    try:
        return json.loads(stdout)
    except ValueError as exc:
        raise InventoryError(Location(source), f"ansible-inventory printed no JSON: {exc}") from None


def inventory_from_listing(listing: Any, source: str) -> Inventory:
    """``ansible-inventory --list`` JSON: hostvars are already merged; membership is not."""
    if not isinstance(listing, dict):
        raise InventoryError(Location(source), "ansible-inventory printed something other than a mapping")
    hostvars = (listing.get("_meta") or {}).get("hostvars") or {}
    groups = {name: body for name, body in listing.items() if name != "_meta" and isinstance(body, dict)}
    direct = {name: list(body.get("hosts") or []) for name, body in groups.items()}
    children = {name: list(body.get("children") or []) for name, body in groups.items()}
    # The listing keeps each group's own hosts and children in Ansible's order, so its order
    # of every group (and of all) follows from them; a host only in hostvars comes last.
    names = list(groups) if "all" in groups else [*groups, "all"]
    members = {name: group_hosts(name, direct, children) for name in names}
    order = list(dict.fromkeys([*members["all"], *(h for hosts in direct.values() for h in hosts), *hostvars]))
    if not order:
        raise InventoryError(Location(source, 1, "hosts"), "the inventory has no hosts")
    for group in groups:
        check_name(group, "group name", Location(source, None, "group name"))
    members["all"] = tuple(order)
    hosts = []
    for name in order:
        merged = {k: Sourced(_unwrap(v), Location(source, None, k)) for k, v in (hostvars.get(name) or {}).items()}
        hosts.append(host_from_vars(name, merged, [g for g, m in members.items() if name in m],
                                    Location(source, None, "host name")))
    return Inventory(hosts=tuple(hosts), groups=frozen_mapping(members), source=source)


def _unwrap(value: Any) -> Any:
    """ansible-inventory's JSON marks ``!unsafe`` and ``!vault`` values as one-key objects."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return _unwrap(value["__ansible_unsafe"])
        if set(value) == {"__ansible_vault"}:
            return VaultEncrypted(value["__ansible_vault"])
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value
