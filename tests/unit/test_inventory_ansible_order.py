"""Ansible's host order, exactly: a differential test against ansible-core's own InventoryManager.

Random inventories (``support/ansible_inventories.py``: YAML and INI, nested children, hosts
in several groups, groups declared in different orders, ``ws[01:04]`` ranges) are read by our
loader and by ansible-core (a dev dependency, the oracle; the project never imports it), and
random patterns are run through both. For every case:

- each group's hosts, in order (what a subscript picks from), the order of ``all`` (the order
  ``--limit`` lists hosts in) and the order hosts were declared (the order a glob meets them);
- ``select(pattern)`` against ``get_hosts(pattern)`` (a play's ``hosts:``), and
  ``limited(pattern)`` against ``subset(pattern)`` then ``get_hosts()`` (``--limit``), in order;
- a play's ``hosts:`` then ``--limit`` (``play_hosts``) against ``subset(limit)`` then
  ``get_hosts(hosts)``: the limit is evaluated on the whole inventory, not on what the play kept;
- a part that matches nothing in Ansible (it only warns) is an error here, and only then (and so
  is a limit that keeps none of the play's hosts).

ansible-core walks a group's grandchildren as a set of objects hashed by identity, so where two
groups of one generation both have children Ansible itself defines no order (it changes from run
to run). ``ansible_orders`` lists every order it can give; where that is one order, ours must be it
and the pattern cases are compared end to end; where it is several, ansible's actual one must be
among them, ours too, and the pattern cases are compared exactly with ansible's own order of this
run put into our inventory (so the selection logic is still checked to the host and the position).
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from reprofleet.errors import InventoryError
from reprofleet.inventory import Inventory, load_inventory
from reprofleet.inventory.patterns import limited, play_hosts, select
from tests.support.ansible_inventories import Drawn, draw_inventory, draw_pattern, to_ini, to_yaml

SEED = 36
INVENTORIES = 80
PATTERNS_PER_INVENTORY = 7
PLAYS_PER_INVENTORY = 2
Outcome = tuple[tuple[str, ...], tuple[str, ...]] | None  # (selected, limited), or None: an error


@dataclass
class Tally:
    cases: int = 0
    play_cases: int = 0
    end_to_end: int = 0  # pattern cases compared on our own inventory as read
    groups_exact: int = 0
    groups_undefined: int = 0  # groups whose order ansible-core itself does not fix
    errors_agreed: int = 0
    differences: list[str] = field(default_factory=list)


def ansible_orders(group: Any) -> set[tuple[str, ...]]:
    """Every order ansible-core's ``Group.get_hosts`` can give ``group``: its own hosts, then each
    generation of descendants, where each generation below the children is found by walking the one
    above in any order (a set hashed by identity). Read off ansible's own Group objects."""
    orders: set[tuple[str, ...]] = set()

    def walk(generation: list[Any], reached: set[str], hosts: dict[str, None]) -> None:
        hosts = dict(hosts)
        for member in generation:
            hosts.update((h.name, None) for h in member.hosts if h.name not in hosts)
        # only the groups with children not reached yet can change the next generation's order
        leading = [g for g in generation if any(c.name not in reached for c in g.child_groups)]
        nexts = set()
        for walked in itertools.permutations(leading):
            found: list[Any] = []
            for member in walked:
                found.extend(c for c in member.child_groups if c.name not in reached and c not in found)
            nexts.add(tuple(found))
        for found_tuple in nexts:
            if found_tuple:
                walk(list(found_tuple), reached | {c.name for c in found_tuple}, hosts)
            else:
                orders.add(tuple(hosts))

    walk([group], {group.name}, {})
    return orders


def _ansible(manager: Any, pattern: str, limit: bool) -> tuple[str, ...] | None:
    from ansible.errors import AnsibleError

    manager.subset(pattern if limit else None)
    try:
        return tuple(h.name for h in (manager.get_hosts() if limit else manager.get_hosts(pattern)))
    except AnsibleError:  # a subscript out of range
        return None
    finally:
        manager.subset(None)


def ansible_outcome(manager: Any, pattern: str) -> Outcome:
    """Ansible's answer, or None where a part of the pattern matches no host (we stop there)."""
    from ansible.inventory.manager import split_host_pattern

    for part in split_host_pattern(pattern):
        if not _ansible(manager, part.lstrip("&!"), limit=False):
            return None
    selected, limited_ = _ansible(manager, pattern, limit=False), _ansible(manager, pattern, limit=True)
    return None if selected is None or limited_ is None else (selected, limited_)


def ansible_play(manager: Any, play: str, limit: str) -> tuple[str, ...] | None:
    """The hosts ansible-playbook runs a play of ``hosts: play`` on with ``--limit limit``; None: we stop."""
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import split_host_pattern

    for part in split_host_pattern(play) + split_host_pattern(limit):
        if not _ansible(manager, part.lstrip("&!"), limit=False):
            return None
    manager.subset(limit)
    try:
        return tuple(h.name for h in manager.get_hosts(play)) or None
    except AnsibleError:
        return None
    finally:
        manager.subset(None)


def our_play(inventory: Inventory, play: str, limit: str) -> tuple[str, ...] | None:
    try:
        return play_hosts(inventory, play, limit).names
    except InventoryError:
        return None


def our_outcome(inventory: Inventory, pattern: str) -> Outcome:
    try:
        return select(inventory, pattern).names, limited(inventory, pattern).names
    except InventoryError:
        return None


def with_ansible_orders(ours: Inventory, manager: Any) -> Inventory:
    """Our inventory with the group orders and the declaration order ansible-core gave this run."""
    by_name = {h.name: h for h in ours.hosts}
    groups = {name: tuple(h.name for h in group.get_hosts()) for name, group in manager.groups.items()}
    return dataclasses.replace(ours, hosts=tuple(by_name[n] for n in groups["all"]), groups=groups,
                               declared=tuple(manager.hosts))


def compare_groups(ours: Inventory, manager: Any, where: str, tally: Tally) -> bool:
    """Each group's order against ansible's; True when ansible-core fixes every one of them."""
    defined = True
    if list(ours.groups) != list(manager.groups) or list(ours.declared_names) != list(manager.hosts):
        tally.differences.append(f"{where}: groups {list(ours.groups)} != {list(manager.groups)} or declared "
                                 f"{ours.declared_names} != {list(manager.hosts)}")
    if ours.names != ours.groups.get("all"):
        tally.differences.append(f"{where}: hosts {ours.names} are not in the order of all {ours.groups.get('all')}")
    for name, group in manager.groups.items():
        theirs = tuple(h.name for h in group.get_hosts())
        possible = ansible_orders(group)
        mine = tuple(ours.groups.get(name, ()))
        if theirs not in possible:
            tally.differences.append(f"{where}: the model of ansible's freedom misses {name}: {theirs}")
        if len(possible) == 1:
            tally.groups_exact += 1
            if mine != theirs:
                tally.differences.append(f"{where}: group {name}: ours {mine}, ansible's {theirs}")
        else:
            defined = False
            tally.groups_undefined += 1
            if mine not in possible:
                tally.differences.append(f"{where}: group {name}: ours {mine} is no order ansible can give")
    return defined


def compare_inventory(path: Path, drawn: Drawn, rng: random.Random, tally: Tally) -> None:
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    text = path.read_text()
    ours = load_inventory(path)
    manager = InventoryManager(loader=DataLoader(), sources=[str(path)])
    defined = compare_groups(ours, manager, f"{path.name}\n{text}", tally)
    substituted = with_ansible_orders(ours, manager)
    for _ in range(PATTERNS_PER_INVENTORY):
        pattern = draw_pattern(drawn, rng)
        tally.cases += 1
        theirs = ansible_outcome(manager, pattern)
        tally.errors_agreed += theirs is None
        if our_outcome(substituted, pattern) != theirs:
            tally.differences.append(f"{path.name} {pattern!r}: ours (ansible's order) "
                                     f"{our_outcome(substituted, pattern)}, ansible's {theirs}\n{text}")
        if defined or theirs is None:
            tally.end_to_end += 1
            if our_outcome(ours, pattern) != theirs:
                tally.differences.append(f"{path.name} {pattern!r}: ours {our_outcome(ours, pattern)}, "
                                         f"ansible's {theirs}\n{text}")
    for _ in range(PLAYS_PER_INVENTORY):
        play, limit = draw_pattern(drawn, rng), draw_pattern(drawn, rng)
        tally.play_cases += 1
        ran = ansible_play(manager, play, limit)
        mine = [our_play(substituted, play, limit), *([our_play(ours, play, limit)] if defined or ran is None else [])]
        if any(answer != ran for answer in mine):
            tally.differences.append(f"{path.name} hosts: {play!r} --limit {limit!r}: ours {mine}, ansible's {ran}\n{text}")


def test_hosts_and_their_order_are_ansible_cores_on_random_inventories_and_patterns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(SEED)
    tally = Tally()
    for number in range(INVENTORIES):
        drawn = draw_inventory(rng)
        suffix, text = (".yml", to_yaml(drawn, rng)) if number % 2 else (".ini", to_ini(drawn, rng))
        path = tmp_path / f"case{number:03d}{suffix}"
        path.write_text(text)
        compare_inventory(path, drawn, rng, tally)
    with capsys.disabled():
        print(f"\nansible-core differential: {tally.cases} pattern cases ({tally.end_to_end} end to end, "
              f"{tally.errors_agreed} stopped on a part Ansible matches nothing with), {tally.groups_exact} group "
              f"orders compared exactly, {tally.groups_undefined} that ansible-core leaves open, {tally.play_cases} "
              f"plays with a --limit; "
              f"{len(tally.differences)} differences")
    assert not tally.differences, "\n\n".join(tally.differences[:5])
    assert tally.cases >= 500 and tally.end_to_end >= 250 and tally.groups_exact >= 400 and tally.play_cases >= 100


NESTED = """\
all:
  children:
    lab:
      children:
        rack1:
          hosts:
            ws01:
            ws02:
        rack2:
          hosts:
            ws03:
      hosts:
        ws09:
    office:
      hosts:
        ws02:
        db1:
"""


@pytest.mark.parametrize("pattern, first", [
    ("lab[0]", ("ws09",)), ("lab[-1]", ("ws03",)), ("lab[1:]", ("ws01", "ws02", "ws03")),
    ("lab[1:0]", ("ws01",)),  # ansible-core reads an end of 0 as no end: [1:0] is [1]
    ("*[5:7]", ("ws09", "ws01", "ws02")),  # '*' matches all (5 hosts), ungrouped, then lab: counted again
])
def test_a_subscript_on_a_group_with_children_counts_its_own_hosts_first(tmp_path: Path, pattern: str,
                                                                        first: tuple[str, ...]) -> None:
    path = tmp_path / "nested.yml"
    path.write_text(NESTED)
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    manager = InventoryManager(loader=DataLoader(), sources=[str(path)])
    assert select(load_inventory(path), pattern).names == first == tuple(h.name for h in manager.get_hosts(pattern))


def test_hosts_are_listed_in_the_order_of_all_as_ansible_limit_lists_them(tmp_path: Path) -> None:
    path = tmp_path / "nested.yml"
    path.write_text(NESTED)
    inventory = load_inventory(path)
    # all: its children in order (ungrouped, lab, office) by generation: lab's and office's own
    # hosts before rack1's and rack2's; not the file's order (ws01 first)
    assert inventory.names == ("ws09", "ws02", "db1", "ws01", "ws03") == inventory.groups["all"]
    assert inventory.declared_names == ("ws01", "ws02", "ws03", "ws09", "db1")
    assert limited(inventory, "rack1:office:lab[0]").names == ("ws09", "ws02", "db1", "ws01")
    assert select(inventory, "rack1:office:lab[0]").names == ("ws01", "ws02", "db1", "ws09")


def test_an_inventory_ansible_inventory_lists_keeps_ansibles_order(tmp_path: Path) -> None:
    from reprofleet.inventory.listing import ansible_list, inventory_from_listing

    path = tmp_path / "nested.yml"
    path.write_text(NESTED)
    listed = inventory_from_listing(ansible_list(str(path), 60.0), str(path))
    read = load_inventory(path)
    assert listed.names == read.names
    assert dict(listed.groups) == {g: hosts for g, hosts in read.groups.items() if hosts}  # empty ones aren't listed


def test_a_limit_is_read_on_the_whole_inventory_not_on_what_the_plays_hosts_kept(tmp_path: Path) -> None:
    path = tmp_path / "nested.yml"
    path.write_text(NESTED)
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    manager = InventoryManager(loader=DataLoader(), sources=[str(path)])
    inventory = load_inventory(path)
    manager.subset("lab[1:]")  # ws01, ws02, ws03 of the whole lab: not the 2nd on of lab's hosts in office
    ran = tuple(h.name for h in manager.get_hosts("office:lab"))
    assert play_hosts(inventory, "office:lab", "lab[1:]").names == ran == ("ws02", "ws01", "ws03")
    manager.subset("lab[0]")  # ws09, which office does not have: Ansible runs nobody, we stop and say so
    assert manager.get_hosts("office") == []
    with pytest.raises(InventoryError, match="'lab\\[0\\]' keeps none of the hosts the playbook's hosts: 'office' chose"):
        play_hosts(inventory, "office", "lab[0]")
