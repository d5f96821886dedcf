"""A group's hosts in the order Ansible lists them (ansible-core 2.19, ``Group.get_hosts``).

The order decides which host a subscript picks (``lab[0]``, ``lab[-1]``, ``lab[1:]``) and the
order a ``--limit`` lists hosts in (the order of ``all``), so it must be Ansible's:

- the group's own hosts first, in the order they were added to it;
- then its descendants' hosts, nearest generation first: its children in the order they were
  added to it, then the children of those, and so on, each group counted at the generation
  where it is first reached (its shortest distance from the group);
- a host counts only where it first appears.

Below the children ansible-core walks each generation as a Python ``set`` of group objects,
which hash by identity: when two groups of one generation both have children, the order of
the next generation is not defined by Ansible (it changes with the process's memory layout:
the same inventory listed ``all`` in three different orders over ten runs). There we walk
each generation in the order it was reached, which is always one of the orders Ansible can
give, and is stable.
"""

from __future__ import annotations

from typing import Mapping, Sequence


def group_hosts(group: str, own: Mapping[str, Sequence[str]],
                children: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """The hosts of ``group`` and of its descendants, in Ansible's order (see the module text).

    ``own``: each group's own hosts in the order they were added; ``children``: each group's
    child groups in the order they were added. Groups missing from either have none.
    """
    ordered: dict[str, None] = {}
    reached = {group}
    generation = [group]
    while generation:
        for name in generation:
            for host in own.get(name, ()):
                ordered.setdefault(host)
        generation = _next_generation(generation, children, reached)
    return tuple(ordered)


def _next_generation(generation: list[str], children: Mapping[str, Sequence[str]], reached: set[str]) -> list[str]:
    """The groups first reached from ``generation``, in the order it reaches them."""
    found: list[str] = []
    for name in generation:
        for child in children.get(name, ()):
            if child not in reached:
                reached.add(child)
                found.append(child)
    return found
