"""The host agent cannot import reprofleet, so the names both sides use are pinned here."""

from __future__ import annotations

import sys

from reprofleet.model import PHASE_ORDERS, EngineRunner, EventKind, Phase
from tests.support import paths

sys.path.insert(0, str(paths.REPO / "collectors"))
import gpu_health  # noqa: E402
import vllm_phases  # noqa: E402


def test_the_agent_and_the_controller_name_the_same_phases_in_the_same_order() -> None:
    assert list(vllm_phases.V1_ORDER) == [p.value for p in Phase]


def test_the_controller_knows_the_phase_order_of_every_engine_generation_the_agent_parses() -> None:
    agent = {name: tuple(value) for name, value in vars(vllm_phases).items()
             if name.endswith("_ORDER") and isinstance(value, tuple)}
    controller = {runner: tuple(p.value for p in order) for runner, order in PHASE_ORDERS.items()}
    assert set(agent.values()) == set(controller.values())  # no order on one side only
    assert controller[EngineRunner.V1_RUNNER] == agent["V1_ORDER"] == controller[EngineRunner.V0_ENGINE]
    assert controller[EngineRunner.V2_RUNNER] == agent["V2_ORDER"]


def test_a_v2_start_read_by_the_agent_fits_only_the_controllers_v2_order() -> None:
    from reprofleet.model.phases import runners_of

    log = (paths.FIXTURES / "vllm-logs" / "v0.33.0-dflash-v2runner.log").read_text()
    phases = [phase for _, phase in vllm_phases.phases_of(log.splitlines())]
    assert phases.index("cuda_graph_capture") < phases.index("kv_cache")
    assert runners_of(phases[-1], phases) == (EngineRunner.V2_RUNNER,)


def test_every_kind_the_protocol_documents_is_known_to_the_controller() -> None:
    protocol = (paths.REPO / "collectors" / "PROTOCOL.md").read_text()
    for kind in EventKind:
        assert f"`{kind.value}`" in protocol, kind


def test_the_health_checks_are_named_alike_on_both_sides_and_in_the_protocol() -> None:
    from reprofleet.remote.replies import HEALTH_CHECKS

    protocol = (paths.REPO / "collectors" / "PROTOCOL.md").read_text()
    assert tuple(gpu_health.CHECKS) == HEALTH_CHECKS
    assert "`health --gpu N" in protocol and all(f"`{name}`" in protocol for name in HEALTH_CHECKS)
    for key in ("watchdog", "panic_sysctls", "kdump_loaded"):  # the facts the reboot grace is decided from
        assert f"`{key}`" in protocol, key
