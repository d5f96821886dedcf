"""Ansible inventories as users already have them -> the hosts a campaign runs on.

A fleet owner already describes their machines in an Ansible inventory, so we read that
format as Ansible does instead of inventing one: YAML and INI files are parsed here (with
real line numbers for every error), ``group_vars/`` and ``host_vars/`` beside the file are
merged in Ansible's precedence order, and any other source (a directory, a dynamic
inventory script, a plugin config) is handed to ``ansible-inventory --list`` when it is
installed. Ansible itself is never imported: it is an optional tool, not a library we
depend on. ``tests/test_inventory.py`` checks our reading against ``ansible-inventory``.
"""

from __future__ import annotations

import ast
import os
import shlex
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from reprofleet import hostpattern
from reprofleet.errors import InventoryError, Location
from reprofleet.model import CredentialRef, Host, PowerPort, frozen_mapping
from reprofleet.suggest import (
    LineMap,
    LocatedLoader,
    did_you_mean,
    line_of,
    load_located_yaml,
    plain,
)
