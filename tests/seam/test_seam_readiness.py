"""A host that cannot run its plan is found before its first attempt, with one line per
problem naming the fix; it runs nothing and its slots are ``not run`` (they run again)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from reprofleet.clock import VirtualClock
from reprofleet.model import Host, Runtime, RuntimeKind
from reprofleet.runner.readiness import problems
from tests.support.seam_host import FakeHost, events, records, run_host, seam_book, seam_context
from tests.support.scripted_runner import cell

READY = {"nvml": "ok", "gpus": [{"index": 0, "name": "NVIDIA RTX PRO 6000 Blackwell"}],
         "nvidia_smi": "/usr/bin/nvidia-smi", "privilege": "root", "docker": "28.3.2",
         "docker_runtimes": ["io.containerd.runc.v2", "nvidia", "runc"]}


def test_a_host_without_nvidia_smi_runs_nothing_and_says_how_to_fix_it(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "no-smi", script=("clean",) * 3)
    fake.facts = {**READY, "nvidia_smi": None}
    ctx = seam_context(seam_book(tmp_path, attempts=3), tmp_path, clock)
    run_host(fake, ctx)
    assert fake.attempts_run == 0 and fake.policy_calls == []  # nothing was tried on the GPU
    (not_ready,) = events(ctx, "not_ready")
    assert not_ready["problems"] == [
        "nvidia-smi not found on PATH: install the NVIDIA driver's utilities (e.g. nvidia-utils-<version>)"]
    assert [r["reason"][:7] for r in records(ctx)] == ["not run"] * 3  # they run again once it is fixed
    (quarantined,) = events(ctx, "quarantined")
    assert quarantined["reason"].startswith("cannot run here: nvidia-smi not found")


def test_a_ready_host_runs_its_plan(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "ready", script=("clean",) * 2)
    fake.facts = dict(READY)
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    run_host(fake, ctx)
    assert [r["outcome"] for r in records(ctx)] == ["clean", "clean"] and not events(ctx, "not_ready")


HOST = Host(name="ws01", address="10.0.0.1", gpu_index=1)
DOCKER = cell("ref", 0)
PYTHON = replace(cell("py", 1), runtime=Runtime(RuntimeKind.PYTHON, python="python3"))


@pytest.mark.parametrize("facts, expected", [
    ({**READY, "gpus": [{"index": 0}, {"index": 1}]}, []),
    ({**READY, "gpus": [{"index": 0}]}, ["no GPU at index 1 (NVML lists: 0): set gpu_index in the inventory"]),
    ({**READY, "gpus": [{"index": 1, "error": "GPU is lost"}]}, ["GPU 1 does not answer NVML (GPU is lost)"]),
    ({**READY, "nvml": "libnvidia-ml.so.1: cannot open shared object file"}, ["NVML cannot be used on the host"]),
    ({**READY, "gpus": [{"index": 1}], "privilege": "none"}, ["nvidia-smi's setters need root"]),
    ({**READY, "gpus": [{"index": 1}], "docker": None}, ["docker is not installed or its daemon does not answer"]),
    ({**READY, "gpus": [{"index": 1}], "docker_runtimes": ["runc"]}, ["docker has no nvidia runtime (docker info lists: runc)"]),
])
def test_each_missing_piece_is_one_line_naming_it(facts: dict, expected: list[str]) -> None:
    found = problems(HOST, [DOCKER], facts)
    assert len(found) == len(expected) and all(f.startswith(e) for f, e in zip(found, expected))


def test_docker_is_only_asked_of_a_host_whose_cells_use_it() -> None:
    facts = {**READY, "gpus": [{"index": 1}], "docker": None}
    assert problems(HOST, [PYTHON], facts) == [] and problems(HOST, [PYTHON, DOCKER], facts) != []


def test_facts_an_agent_did_not_send_are_unknown_not_problems() -> None:
    assert problems(HOST, [DOCKER], {"boot_id": "b", "gpus": []}) == []


def test_a_host_that_breaks_mid_campaign_is_quarantined_after_three_same_reason_infra_not_its_whole_plan(
        tmp_path: Path) -> None:
    from reprofleet.model import GpuPolicy

    clock = VirtualClock()
    fake = FakeHost(clock, "breaks", script=("clean",) * 10)
    locked = replace(cell("locked", 0), gpu=GpuPolicy(graphics_clocks=(180, 2800)))
    ctx = seam_context(seam_book(tmp_path, locked, attempts=10), tmp_path, clock)

    def driver_tools_removed(host: str, **fields: object) -> None:
        if fields.get("outcome") == "clean":
            fake.policy_broken = "nvidia-smi not found on PATH"
            fake.boot_id = "boot-after-upgrade"  # a new boot: the policy is applied again

    ctx.progress = driver_tools_removed
    run_host(fake, ctx)
    outcomes = [(r["outcome"], (r["reason"] or "")[:20]) for r in records(ctx)]
    assert outcomes[0][0] == "clean"
    assert [o for o, _ in outcomes[1:4]] == ["infra"] * 3  # three tries, each the same reason
    assert all(reason.startswith("not run") for _, reason in outcomes[4:]) and len(outcomes) == 10
    (quarantined,) = events(ctx, "quarantined")
    assert quarantined["reason"].startswith("3 attempts in a row were infra for the same reason: ")
    assert "nvidia-smi not found on PATH" in quarantined["reason"]
    assert fake.attempts_run == 1
