"""The host agent cannot import reprofleet, so the names both sides use are pinned here."""

from __future__ import annotations

import sys
from pathlib import Path

from reprofleet.model import EventKind, Phase

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "collectors"))
import gpu_health  # noqa: E402
import vllm_phases  # noqa: E402


def test_the_agent_and_the_controller_name_the_same_phases_in_the_same_order() -> None:
    assert list(vllm_phases.V1_ORDER) == [p.value for p in Phase]


def test_every_kind_the_protocol_documents_is_known_to_the_controller() -> None:
    protocol = (Path(__file__).resolve().parents[1] / "collectors" / "PROTOCOL.md").read_text()
    for kind in EventKind:
        assert f"`{kind.value}`" in protocol, kind


def test_the_health_checks_are_named_alike_on_both_sides_and_in_the_protocol() -> None:
    from reprofleet.remote.replies import HEALTH_CHECKS

    protocol = (Path(__file__).resolve().parents[1] / "collectors" / "PROTOCOL.md").read_text()
    assert tuple(gpu_health.CHECKS) == HEALTH_CHECKS
    assert "`health --gpu N" in protocol and all(f"`{name}`" in protocol for name in HEALTH_CHECKS)
    for key in ("watchdog", "panic_sysctls", "kdump_loaded"):  # the facts the reboot grace is decided from
        assert f"`{key}`" in protocol, key
