"""The fleet phase hands its modules out longest first (tests/fleet/conftest.py): the measured
long modules lead in the order of their seconds, a module's tests keep their order, and
modules without a measurement (and every test outside tests/fleet/) keep the collected order."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fleet.conftest import FLEET, MEASURED_S, fleet_order


@dataclass(frozen=True)
class FakeItem:
    path: Path
    name: str


def _items(*spec: tuple[Path, str]) -> list[Any]:
    return [FakeItem(path, name) for path, name in spec]


def test_the_longest_measured_module_goes_first_and_a_modules_tests_keep_their_order() -> None:
    longest, second = sorted(MEASURED_S, key=lambda name: -MEASURED_S[name])[:2]
    unmeasured = FLEET / "test_not_measured.py"
    unit = FLEET.parent / "unit" / longest  # same file name, not a fleet module: not moved
    collected = _items((unmeasured, "a"), (FLEET / second, "s1"), (unit, "u"), (FLEET / longest, "l1"),
                       (FLEET / second, "s2"), (FLEET / longest, "l2"), (unmeasured, "b"))
    ordered = [item.name for item in fleet_order(collected)]
    assert ordered == ["l1", "l2", "s1", "s2", "a", "u", "b"]


def test_every_measured_module_exists() -> None:
    assert sorted(name for name in MEASURED_S if not (FLEET / name).is_file()) == []
