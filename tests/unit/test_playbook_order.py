"""plan_order: the slots of every cell on one host, and the ``blocks`` order (the default)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from reprofleet.model import Host, Playbook
from reprofleet.playbook import cell_slots, load_playbook, plan_order
from reprofleet.stats.sprt import fixed_n

HOSTS = tuple(f"ws{n:02d}" for n in range(1, 9))


def book(tmp_path: Path, cells: int = 10, attempts: int = 6, extra: str = "", cell_extra: dict[int, str] | None = None,
         order: str = "") -> Playbook:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "poc.py").write_text("")
    matrix = "".join(f"  - name: c{c}\n" + (cell_extra or {}).get(c, "") for c in range(cells))
    path = tmp_path / "campaign.yml"
    path.write_text(f"name: t\npoc: {{script: poc.py}}\nattempts: {attempts}\n"
                    + (f"order: {order}\n" if order else "") + extra + "matrix:\n" + matrix)
    return load_playbook(path)


def rounds(plan: list[tuple[int, int]], sizes: list[int]) -> list[list[tuple[int, int]]]:
    out, start = [], 0
    for size in sizes:
        out.append(plan[start:start + size])
        start += size
    assert start == len(plan)
    return out


# --- blocks -------------------------------------------------------------------------------------


def test_blocks_is_the_default_order(tmp_path: Path) -> None:
    assert book(tmp_path).order == "blocks"


def test_every_round_of_blocks_holds_each_cell_exactly_once_at_that_rounds_attempt(tmp_path: Path) -> None:
    playbook = book(tmp_path)
    for host in HOSTS:
        for r, block in enumerate(rounds(plan_order(playbook, host), [10] * 6)):
            assert sorted(c for c, _ in block) == list(range(10))
            assert {a for _, a in block} == {r}


def test_blocks_draw_a_fresh_permutation_each_round_and_on_each_host(tmp_path: Path) -> None:
    playbook = book(tmp_path)
    per_host = {host: [tuple(c for c, _ in block) for block in rounds(plan_order(playbook, host), [10] * 6)]
                for host in HOSTS}
    for host, orders in per_host.items():
        assert len(set(orders)) == 6, f"{host} repeats a round's order"
    for r in range(6):
        assert len({orders[r] for orders in per_host.values()}) == len(HOSTS), f"hosts share round {r}'s order"


def test_no_cell_is_always_first_every_cell_leads_a_round_somewhere(tmp_path: Path) -> None:
    """A fixed cycle gives the first cell the cold cache and the next cell the post-power-cycle slot."""
    playbook = book(tmp_path)
    first = Counter(block[0][0] for host in HOSTS for block in rounds(plan_order(playbook, host), [10] * 6))
    assert set(first) == set(range(10))


def test_the_same_seed_and_host_give_the_same_blocks_on_every_run(tmp_path: Path) -> None:
    playbook = book(tmp_path / "a", cells=3, attempts=3, extra="seed: 1\n")
    plan = plan_order(playbook, "ws01")
    assert plan_order(book(tmp_path / "b", cells=3, attempts=3, extra="seed: 1\n"), Host("ws01", "10.0.0.1")) == plan
    # pinned: the order must not change between releases, or a resumed campaign disagrees
    assert plan == [(0, 0), (2, 0), (1, 0), (1, 1), (2, 1), (0, 1), (0, 2), (2, 2), (1, 2)]
    other_seed = book(tmp_path / "c", cells=3, attempts=3, extra="seed: 2\n")
    assert [plan_order(other_seed, h) for h in HOSTS] != [plan_order(playbook, h) for h in HOSTS]


def test_a_cell_with_fewer_slots_drops_out_of_the_rounds_after_its_last(tmp_path: Path) -> None:
    # c0 is the reference (6 slots), c1 may stop at its first reproduction (3 x 6 slots), c2 runs 6
    playbook = book(tmp_path, cells=3, cell_extra={1: "    stop: {rule: first_reproduction}\n"})
    assert cell_slots(playbook) == [6, 18, 6]
    for host in HOSTS:
        plan = plan_order(playbook, host)
        blocks = rounds(plan, [3] * 6 + [1] * 12)
        for r, block in enumerate(blocks):
            assert sorted(c for c, _ in block) == ([0, 1, 2] if r < 6 else [1])
            assert {a for _, a in block} == {r}


@pytest.mark.parametrize("order", ["blocks", "interleaved", "sequential", "shuffled"])
def test_attempt_indexes_count_up_within_each_cell_in_every_order(tmp_path: Path, order: str) -> None:
    playbook = book(tmp_path, cells=4, attempts=3, order=order,
                    cell_extra={2: "    stop: {rule: sprt, p0: 0.5, p1: 0.05}\n"})
    slots = cell_slots(playbook)
    assert slots[2] > 3
    for host in HOSTS[:3]:
        plan = plan_order(playbook, host)
        for cell, count in enumerate(slots):
            assert [a for c, a in plan if c == cell] == list(range(count))


# --- slots per cell -------------------------------------------------------------------------------


def test_a_cell_under_sprt_gets_three_times_the_fixed_n_design_in_slots(tmp_path: Path) -> None:
    playbook = book(tmp_path, cells=3, cell_extra={1: "    stop: {rule: sprt, p0: 0.3, p1: 0.03}\n"})
    design = fixed_n(0.3, 0.03, 0.05, 0.2)
    assert design == 14  # the exact binomial design; the cap is three of them
    assert cell_slots(playbook) == [6, 3 * design, 6]
    assert Counter(c for c, _ in plan_order(playbook, "ws01")) == {0: 6, 1: 42, 2: 6}


def test_the_reference_keeps_its_attempts_when_the_campaign_wide_stop_is_sprt(tmp_path: Path) -> None:
    playbook = book(tmp_path, cells=3, extra="reference: c1\nstop: {rule: sprt, p0: 0.3, p1: 0.03}\n")
    assert cell_slots(playbook) == [42, 6, 42]
    assert Counter(c for c, _ in plan_order(playbook, "ws01")) == {0: 42, 1: 6, 2: 42}


def test_interleaved_and_sequential_skip_a_cells_slots_once_it_has_none_left(tmp_path: Path) -> None:
    cells = {1: "    stop: {rule: first_reproduction}\n"}  # 3 x 2 slots
    interleaved = book(tmp_path / "i", cells=2, attempts=2, order="interleaved", cell_extra=cells)
    assert plan_order(interleaved, "ws01") == [(0, 0), (1, 0), (0, 1), (1, 1), (1, 2), (1, 3), (1, 4), (1, 5)]
    sequential = book(tmp_path / "s", cells=2, attempts=2, order="sequential", cell_extra=cells)
    assert plan_order(sequential, "ws01") == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (1, 3), (1, 4), (1, 5)]
