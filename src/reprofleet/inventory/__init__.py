"""Ansible inventories as users already have them -> the hosts a campaign runs on.

A fleet owner already describes their machines in an Ansible inventory, so we read that
format as Ansible does instead of inventing one: YAML and INI files are parsed here (with
real line numbers for every error), ``group_vars/`` and ``host_vars/`` beside the file are
merged in Ansible's precedence order, and any other source (a directory, a dynamic
inventory script, a plugin config) is handed to ``ansible-inventory --list`` when it is
installed. Ansible itself is never imported: it is an optional tool, not a library we
depend on. ``tests/unit/test_inventory.py`` checks our reading against ``ansible-inventory``.

    from reprofleet.inventory import load_inventory
    inventory = load_inventory("inventory/blackwell.yml")

Modules: ``load`` (which reader a path needs), ``graph`` (groups and hosts), ``order`` (a
group's hosts in Ansible's order), ``ranges``
(host keys and their ranges), ``patterns`` (which hosts run: Ansible's ``--limit`` grammar), ``yaml_format`` and ``ini_format`` (the parsers),
``vars_files`` (group_vars/host_vars), ``hosts`` (precedence and Host construction),
``listing`` (the ``ansible-inventory`` path), ``values`` (what they share), ``netconsole``
(the ``netconsole:`` block), ``login`` (host names, addresses and users are data, never
ssh options), ``gpu_access`` (``gpu_policy: observe``: hosts whose GPU settings are never
changed), ``recovery`` (the ``recovery: [nmi, cycle]`` ladder and ``nmi_reboot_s``), ``slurm_source``
(``-i slurm:PARTITION``: Slurm's nodes, merged with an Ansible inventory for login and power).
"""

from __future__ import annotations

from reprofleet.inventory.hosts import (
    ADDRESS_VARS,
    KEY_FILE_VARS,
    PDU_SECRET_KEYS,
    PORT_VARS,
    USER_VARS,
    Inventory,
    credential_ref,
    host_from_vars,
    power_port,
)
from reprofleet.inventory.ini_format import ini_value
from reprofleet.inventory.listing import ANSIBLE_INVENTORY_TIMEOUT_S, ansible_inventory_command
from reprofleet.inventory.load import load_inventory
from reprofleet.inventory.ranges import expand_host_pattern, expand_host_ranges
from reprofleet.inventory.slurm_source import SLURM_VARIABLE, SOURCE_JOINER
from reprofleet.inventory.values import YAML_SUFFIXES, VaultEncrypted

__all__ = [
    "ADDRESS_VARS", "ANSIBLE_INVENTORY_TIMEOUT_S", "Inventory", "KEY_FILE_VARS", "PDU_SECRET_KEYS", "PORT_VARS",
    "SLURM_VARIABLE", "SOURCE_JOINER", "USER_VARS", "VaultEncrypted", "YAML_SUFFIXES", "ansible_inventory_command", "credential_ref",
    "expand_host_pattern", "expand_host_ranges", "host_from_vars", "ini_value", "load_inventory", "power_port",
]
