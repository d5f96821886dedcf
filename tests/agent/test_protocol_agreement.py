"""The host agent cannot import reprofleet, so the names both sides use are pinned here."""

from __future__ import annotations

import sys

import pytest

from reprofleet.model import CAPTURE_NEXT_NOTE, START_ORDER, EventKind, Phase
from reprofleet.model import phases
from tests.support import paths

sys.path.insert(0, str(paths.REPO / "collectors"))
import gpu_health  # noqa: E402
import vllm_phases  # noqa: E402


def test_the_agent_and_the_controller_name_the_same_phases() -> None:
    assert set(vllm_phases.START_ORDER) == {p.value for p in Phase}


def test_the_agent_and_the_controller_walk_the_same_engine_start_order_and_mark_the_same_step() -> None:
    assert vllm_phases.START_ORDER == tuple(p.value for p in START_ORDER)
    assert vllm_phases.CAPTURE_NEXT == phases.CAPTURE_NEXT and vllm_phases.CAPTURE_NEXT_NOTE == CAPTURE_NEXT_NOTE


@pytest.mark.parametrize("name", sorted(log.stem for log in (paths.FIXTURES / "vllm-logs").glob("*.log")))
def test_the_steps_the_agent_took_are_the_steps_the_controller_reads_from_the_phase_names(name: str) -> None:
    """The controller sees phase names only; its walk lands on the agent's own steps."""
    log = (paths.FIXTURES / "vllm-logs" / (name + ".log")).read_text().splitlines()
    tracker = vllm_phases.PhaseTracker()
    taken = [tracker.step for line in log if tracker.feed(line)]
    assert phases.walk([p for _, p in vllm_phases.phases_of(log)]) == taken


def test_every_kind_the_protocol_documents_is_known_to_the_controller() -> None:
    protocol = (paths.REPO / "collectors" / "PROTOCOL.md").read_text()
    for kind in EventKind:
        assert f"`{kind.value}`" in protocol, kind


def test_the_health_checks_are_named_alike_on_both_sides_and_in_the_protocol() -> None:
    from reprofleet.remote.replies import HEALTH_CHECKS

    protocol = (paths.REPO / "collectors" / "PROTOCOL.md").read_text()
    assert tuple(gpu_health.CHECKS) == HEALTH_CHECKS
    assert "`health --gpu N" in protocol and all(f"`{name}`" in protocol for name in HEALTH_CHECKS)
    for key in ("watchdog", "panic_sysctls", "kdump_loaded", "kdump"):  # the reboot grace, the nmi rung
        assert f"`{key}`" in protocol, key
