"""The order in which one host runs the (cell, attempt) slots of a campaign.

Each cell gets as many slots as its stopping rule may use (``stopping.max_attempts``): the
playbook's ``attempts`` under fixed_n, more under sprt or first_reproduction. The host
runner skips the slots of a cell that has stopped, so the plan is the longest a host can
run, and it is identical on every run (a resumed campaign agrees with the first).
"""

from __future__ import annotations

import hashlib

from reprofleet.model import Host, Playbook, StopRule
from reprofleet.stats.stop_rules import max_attempts


def plan_order(playbook: Playbook, host: str | Host) -> list[tuple[int, int]]:
    """(cell index, attempt index) pairs in the order one host runs them.

    blocks (default): round r holds one slot of every cell that still has slots, in a
    fresh permutation per round and host. A fixed cycle would always run the cell after a
    wedge-prone cell right after a power cycle, and always give the first cell the cold
    cache; the permutation spreads both over every cell, while each round still keeps
    cells side by side in time, so slow drift hits all of them alike.
    interleaved: c0a0 c1a0 c2a0 c0a1 ...; sequential: every attempt of c0, then c1 ...;
    shuffled: one permutation of all slots. Permutations are fixed by ``seed``, the host
    name (and the round), never by an RNG whose stream could change between versions.
    Attempt indexes count up within each cell in every order.
    """
    name = host.name if isinstance(host, Host) else host
    slots = cell_slots(playbook)
    if playbook.order == "sequential":
        return [(c, a) for c, count in enumerate(slots) for a in range(count)]
    if playbook.order == "interleaved":
        return [(c, a) for a in range(max(slots)) for c, count in enumerate(slots) if a < count]
    if playbook.order == "blocks":
        return [(c, r) for r in range(max(slots))
                for c in _permuted([c for c, count in enumerate(slots) if r < count], f"{playbook.seed or 0}:{name}:block{r}")]
    sequence = _permuted([c for c, count in enumerate(slots) for _ in range(count)], f"{playbook.seed or 0}:{name}")
    seen = [0] * len(slots)
    plan = []
    for c in sequence:
        plan.append((c, seen[c]))
        seen[c] += 1
    return plan


def cell_slots(playbook: Playbook) -> list[int]:
    """Slots per cell, in matrix order: what its stopping rule may use on one host."""
    by_rule: dict[StopRule, int] = {}  # fixed_n of an SPRT design is a search: once per rule
    slots = []
    for cell in playbook.cells:
        rule = playbook.stop_rule(cell)
        if rule not in by_rule:
            by_rule[rule] = max_attempts(rule, playbook.attempts)
        slots.append(by_rule[rule])
    return slots


def _permuted(items: list[int], key: str) -> list[int]:
    """Fisher-Yates on a sha256 stream of ``key``: the same permutation on every machine and version."""
    items = list(items)
    for i in range(len(items) - 1, 0, -1):
        digest = hashlib.sha256(f"{key}:{i}".encode()).digest()
        j = int.from_bytes(digest[:8], "big") % (i + 1)
        items[i], items[j] = items[j], items[i]
    return items
