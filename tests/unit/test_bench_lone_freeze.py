"""bench/lone_freeze.py measures what it says: its baseline arm is the rule before issue 32 item
15 (held until a peer's stream speaks), its outages freeze nothing and declare nothing."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support import paths


def _load() -> ModuleType:
    sys.path.insert(0, str(paths.REPO / "bench"))
    spec = importlib.util.spec_from_file_location("lone_freeze", paths.REPO / "bench" / "lone_freeze.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["lone_freeze"] = module
    spec.loader.exec_module(module)
    return module


bench = _load()


def test_two_stalled_peers_hold_a_freeze_under_todays_rule_and_not_under_peer_evidence() -> None:
    scenario = bench.draw("two stalls", 3)
    today, new = bench.run(scenario, "today"), bench.run(scenario, "peer evidence")
    first_stall_ends = min(t.changes[-1][0] for h, t in scenario.hosts.items() if h != "ws01")
    assert today.held and today.declared_s > max(first_stall_ends, 4.0)
    assert not new.held and new.declared_s <= 4.0
    assert today.false_wedges == new.false_wedges == []


def test_a_switch_outage_holds_every_host_and_declares_none_under_either_rule() -> None:
    scenario = bench.draw("outage after a stall", 1)
    for rule in bench.RULES:
        outcome = bench.run(scenario, rule)
        assert outcome.held and outcome.declared_s is None and outcome.false_wedges == []


def test_a_percentile_is_a_value_of_the_sample() -> None:
    assert bench.percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.9) == 5.0
    assert bench.percentile([1.0, 2.0, 3.0], 0.5) == 2.0
