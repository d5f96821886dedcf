"""The health gate at the host seam, in virtual time: a host back from a wedge rejoins only
with its GPU still there (runner/health_gate.py, called by runner/recovery.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from reprofleet.clock import VirtualClock
from reprofleet.model import GpuPolicy
from reprofleet.remote.replies import parse_health
from reprofleet.runner.health_gate import expected_gpu, judge
from tests.support.seam_host import FakeHost, events, records, recovery_path, run_host, seam_book, seam_context
from tests.support.scripted_runner import cell

BUS = "00000000:01:00.0"
FACTS = {"nvml": "ok", "gpus": [{"index": 0, "pci_bus_id": BUS, "name": "NVIDIA RTX PRO 6000"}]}
FELL_OFF = ("the GPU fell off the bus after the wedge (NVML: GPU is lost, lspci rev ff, nvidia-smi exit 15): "
            "power the host off and on by hand or reseat; quarantined")


def _host(clock: VirtualClock, name: str, script: tuple[str, ...], **kwargs: Any) -> FakeHost:
    fake = FakeHost(clock, name, script=script, boot_delay_s=0.5, **kwargs)
    fake.facts = dict(FACTS)
    return fake


def test_a_gpu_gone_after_the_power_cycle_quarantines_its_host_with_the_words(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = _host(clock, "gone", ("wedge", "clean", "clean"), gpu_falls_off=True)
    ctx = seam_context(seam_book(tmp_path, attempts=3, attempt_timeout=30, boot=15), tmp_path, clock)
    run_host(fake, ctx)
    found = records(ctx)
    assert [r["outcome"] for r in found] == ["wedge", "infra", "infra"]  # the wedge counts; nothing ran after
    assert all(r["reason"].startswith("not run") for r in found[1:]) and fake.attempts_run == 1
    health = found[0]["forensics"]["gpu_health"]
    assert health["ok"] is False and health["lost"] is True and health["bus_id"] == BUS
    assert health["failed"][1] == "pci: 0000:01:00.0 reads all ones (lspci: rev ff): the GPU fell off the bus"
    assert found[0]["forensics"]["findings"]  # the post-boot forensics were read before the gate
    assert recovery_path(ctx)[-3:] == ["stable", "forensics", "quarantined"]
    assert events(ctx, "recovery")[-1]["reason"] == FELL_OFF
    assert [e["reason"] for e in events(ctx, "quarantined")] == [FELL_OFF]
    # asked where the GPU was before the wedge, from the prepare-time facts
    assert fake.health_calls == [{"gpu": 0, "bus_id": BUS, "expect_gpus": 1}]


def test_a_healthy_gpu_rejoins_and_runs_the_next_attempt(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = _host(clock, "fine", ("wedge", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=2, attempt_timeout=30, boot=15), tmp_path, clock)
    run_host(fake, ctx)
    found = records(ctx)
    assert [r["outcome"] for r in found] == ["wedge", "clean"]
    assert found[0]["forensics"]["gpu_health"]["ok"] is True and found[0]["forensics"]["gpu_health"]["failed"] == []
    assert recovery_path(ctx)[-2:] == ["forensics", "ready"] and not events(ctx, "quarantined")
    assert found[1]["boot_id"] != found[0]["boot_id"]


def test_a_host_that_reset_itself_is_gated_too(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = _host(clock, "reset", ("reboot", "clean"), self_reset_s=2.0)
    fake.gpu_lost = True  # the reset did not bring the card back
    ctx = seam_context(seam_book(tmp_path, attempts=2, attempt_timeout=30, boot=15), tmp_path, clock,
                       reboot_grace_s=10.0)
    run_host(fake, ctx)
    found = records(ctx)
    assert [r["outcome"] for r in found] == ["reboot", "infra"]
    (quarantined,) = events(ctx, "quarantined")
    assert quarantined["reason"].startswith("the GPU fell off the bus after the reset (")


def test_a_health_check_that_cannot_complete_keeps_the_host_out(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = _host(clock, "mute", ("wedge", "clean"))
    fake.health_fails = "health: timed out after 80 s"  # NVML hung on a card stuck in its driver
    ctx = seam_context(seam_book(tmp_path, attempts=2, attempt_timeout=30, boot=15), tmp_path, clock)
    run_host(fake, ctx)
    found = records(ctx)
    assert [r["outcome"] for r in found] == ["wedge", "infra"]
    assert found[0]["forensics"]["gpu_health"]["error"].endswith("health: timed out after 80 s")
    (quarantined,) = events(ctx, "quarantined")
    assert quarantined["reason"].startswith("the GPU could not be checked after the wedge (")


def test_a_policy_that_fails_to_apply_after_recovery_quarantines_the_host_at_once(tmp_path: Path) -> None:
    """The new boot_id drops the card's settings; recovery applies the last attempt's policy
    again and reads it back before the host rejoins: a card that refuses it is quarantined with
    its words now, not after infra_streak attempts spent on it."""
    clock = VirtualClock()
    fake = _host(clock, "noapply", ("wedge",) + ("clean",) * 5)
    locked = replace(cell("locked", 0), gpu=GpuPolicy(graphics_clocks=(180, 2800)))
    ctx = seam_context(seam_book(tmp_path, locked, attempts=6, attempt_timeout=30, boot=15), tmp_path, clock)
    real_event = ctx.event

    def break_apply_after_the_cycle(host: str, what: Any, **fields: Any) -> None:
        if fields.get("to") == "forensics":
            fake.policy_broken = "Unable to set persistence mode for GPU 00000000:01:00.0: Unknown Error"
        real_event(host, what, **fields)

    ctx.event = break_apply_after_the_cycle  # type: ignore[method-assign]
    run_host(fake, ctx)
    found = records(ctx)
    assert found[0]["outcome"] == "wedge" and "could not be re-applied" in found[0]["forensics"]["policy"]
    assert all(r["reason"].startswith("not run") for r in found[1:]) and len(found) == 6
    (quarantined,) = events(ctx, "quarantined")
    assert quarantined["reason"].startswith("the GPU policy could not be re-applied after recovery: ")
    assert "Unknown Error" in quarantined["reason"]
    assert fake.policy_calls.count("apply") == 2  # before the wedge, then once in recovery


def test_the_gate_judges_each_reply_in_words() -> None:
    reply = parse_health("h", {"k": "health", "ok": False, "lost": False, "bus_id": BUS, "checks": [
        {"name": "nvml", "ok": True, "lost": False, "words": "NVML sees GPU 0", "short": "NVML ok"},
        {"name": "pci", "ok": None, "lost": False, "words": "cannot read the PCI bus", "short": "PCI unknown"},
        {"name": "nvidia_smi", "ok": False, "lost": False, "words": "nvidia-smi did not answer within 20 s",
         "short": "nvidia-smi hung"}]})
    verdict = judge(reply)
    assert not verdict.healthy
    assert verdict.reason == ("the GPU cannot be used after the wedge (nvidia-smi hung): look at the host by hand; "
                              "quarantined")
    assert verdict.forensics["failed"] == ["nvidia_smi: nvidia-smi did not answer within 20 s"]
    assert expected_gpu(FACTS, 0) == (BUS, 1)
    assert expected_gpu({"nvml": "pynvml not importable"}, 0) == (None, None)
    assert expected_gpu({"nvml": "ok", "gpus": [{"index": 0, "error": "GPU is lost"}]}, 0) == (None, 1)


def test_a_reset_found_on_resume_is_gated_before_the_host_runs_again(tmp_path: Path) -> None:
    """The host reset itself while the controller was dead, and came back without its GPU:
    the forensics read on resume end at the same gate."""
    from tests.support.seam_host import outcomes, started_by_a_dead_controller

    clock = VirtualClock()
    fake = _host(clock, "reset-away", ("clean",) * 4)
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    started_by_a_dead_controller(ctx, fake, "reset", index=0)
    fake.lost["reset"] = "boot-before"
    fake.gpu_lost = True
    run_host(fake, ctx)
    assert outcomes(ctx) == [(0, "reboot"), (1, "infra")]
    assert records(ctx)[0]["forensics"]["gpu_health"]["lost"] is True
    (quarantined,) = events(ctx, "quarantined")
    assert quarantined["reason"].startswith("the GPU fell off the bus after the reset (")
