"""The order in which one host runs the (cell, attempt) pairs of a campaign."""

from __future__ import annotations

import hashlib

from reprofleet.model import Host, Playbook


def plan_order(playbook: Playbook, host: str | Host) -> list[tuple[int, int]]:
    """(cell index, attempt index) pairs in the order one host runs them.

    interleaved: c0a0 c1a0 c2a0 c0a1 ... (drift in time hits every cell alike);
    sequential: every attempt of c0, then c1 ...; shuffled: a permutation fixed by
    ``seed`` and the host name, the same on every run (so a resumed campaign agrees),
    with attempt indexes still counting up within each cell.
    """
    name = host.name if isinstance(host, Host) else host
    cells, attempts = len(playbook.cells), playbook.attempts
    if playbook.order == "sequential":
        return [(c, a) for c in range(cells) for a in range(attempts)]
    if playbook.order == "interleaved":
        return [(c, a) for a in range(attempts) for c in range(cells)]
    sequence = [c for c in range(cells) for _ in range(attempts)]
    for i in range(len(sequence) - 1, 0, -1):  # Fisher-Yates on a hash stream: no RNG version drift
        digest = hashlib.sha256(f"{playbook.seed or 0}:{name}:{i}".encode()).digest()
        j = int.from_bytes(digest[:8], "big") % (i + 1)
        sequence[i], sequence[j] = sequence[j], sequence[i]
    seen = [0] * cells
    plan = []
    for c in sequence:
        plan.append((c, seen[c]))
        seen[c] += 1
    return plan
