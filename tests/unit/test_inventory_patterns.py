"""Hosts chosen the Ansible way: every pattern selects what Ansible's own inventory manager
(ansible-core, a dev dependency, the oracle here and never imported by the project) selects
for ``--limit`` on the same inventory, and a part that matches nothing is one clear line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reprofleet.errors import InventoryError
from reprofleet.inventory import load_inventory
from reprofleet.inventory.patterns import select, split_pattern
from tests.support import paths

FLEET = paths.FIXTURES / "patterns" / "fleet.yml"

PATTERNS = [
    "all", "*", "blackwell", "ws_lab", "ws02", "ws0*", "ws0?", "ws[12]*", "~ws0[13]", "~db", "ws_lab:ws_office",
    "blackwell:!ws03", "blackwell:&prod", "blackwell:&prod:!ws04", "!blackwell", "&prod", "prod,staging",
    "prod, staging ,lone", "ws_lab[0]", "ws_lab[1:]", "ws_lab[0:1]", "blackwell[-1]", "ws*:!ws_office",
    "all:!ws0*", "staging:&ws*", "ungrouped", "lone:db1", "blackwell:prod:&staging",
]


def ansible_selects(pattern: str) -> list[str]:
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    manager = InventoryManager(loader=DataLoader(), sources=[str(FLEET)])
    manager.subset(pattern)
    return sorted(h.name for h in manager.get_hosts())


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_pattern_selects_what_ansible_selects(pattern: str) -> None:
    ours = sorted(select(load_inventory(FLEET), pattern).names)
    assert ours == ansible_selects(pattern)
    assert ours  # every pattern above chooses someone: an empty match would prove nothing


def test_the_oracle_is_what_ansible_inventory_limit_prints() -> None:
    listed = subprocess.run([str(Path(sys.executable).with_name("ansible-inventory")), "-i", str(FLEET), "--list",
                             "--limit", "blackwell:&prod:!ws04"], capture_output=True, text=True, timeout=60, check=True)
    groups = json.loads(listed.stdout)
    hosts = sorted({h for g in groups.values() if isinstance(g, dict) for h in g.get("hosts", [])})
    assert hosts == ansible_selects("blackwell:&prod:!ws04") == ["ws02"]


@pytest.mark.parametrize("pattern, parts", [
    ("a,b[1], c[2:3] , d", ["a", "b[1]", "c[2:3]", "d"]),
    ("web:&prod:!ws3", ["web", "&prod", "!ws3"]),
    ("ws[01:03]", ["ws[01:03]"]),  # a range is one part, not two
    ("fe80::1", ["fe80::1"]),  # an IPv6 address is one part
    ("db:2222", ["db:2222"]),  # host:port is one address, as Ansible reads it
])
def test_parts_split_as_ansible_splits_them(pattern: str, parts: list[str]) -> None:
    from ansible.inventory.manager import split_host_pattern

    assert split_pattern(pattern) == parts == split_host_pattern(pattern)


@pytest.mark.parametrize("pattern, words", [
    ("blackwel", "did you mean 'blackwell'"),
    ("blackwell:!ws3", "'!ws3' matches no host or group"),
    ("ws_lab[7]", "matched 3 hosts, so [7] is out of range"),
    ("~ws[,db1", "invalid host pattern '~ws['"),
])
def test_a_part_that_matches_nothing_is_one_line_naming_it(pattern: str, words: str) -> None:
    with pytest.raises(InventoryError) as caught:
        select(load_inventory(FLEET), pattern)
    message = str(caught.value)
    assert words in message and "\n" not in message and message.startswith("--limit")


def test_a_limit_file_names_one_host_per_line(tmp_path: Path) -> None:
    retry = tmp_path / "site.retry"
    retry.write_text("ws01\nws04\n\n")
    assert select(load_inventory(FLEET), f"@{retry}").names == ("ws01", "ws04")
    assert sorted(select(load_inventory(FLEET), f"@{retry}").names) == ansible_selects(f"@{retry}")
