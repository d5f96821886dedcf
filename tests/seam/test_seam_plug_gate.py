"""The plug's own behaviour is read before a host's first attempt (runner/plug_gate.py), at the
seam in virtual time: a plug that would switch the host off by itself refuses the host, one line
with the fix, before any attempt runs; a lesser risk is a warning and the campaign runs."""

from __future__ import annotations

from pathlib import Path

from reprofleet.clock import VirtualClock
from reprofleet.model import GpuPolicy
from reprofleet.power.plug_behaviour import PlugSettings, PowerOnState
from tests.support.scripted_runner import cell
from tests.support.seam_host import Device, FakeHost, events, records, run_host, seam_book, seam_context

GPU = {"gpus": [{"index": 0, "name": "RTX PRO 6000", "power_limit_w": {"enforced": 600.0, "default": 600.0}}]}


def _host(plug: PlugSettings) -> FakeHost:
    fake = FakeHost(VirtualClock(), "plug", script=("clean",) * 3, device=Device(plug=plug))
    fake.facts.update(GPU)
    return fake


def test_a_plug_that_stays_off_after_mains_loss_refuses_the_host_before_its_first_attempt(tmp_path: Path) -> None:
    fake = _host(PlugSettings(power_on=PowerOnState.OFF, auto_off_s=0.0, said={"power-on state": "PowerOnState 0"},
                              fixes={"power-on state": "PowerOnState 1"}))
    ctx = seam_context(seam_book(tmp_path, attempts=3), tmp_path, fake.clock)
    runner = run_host(fake, ctx)
    assert fake.attempts_run == 0  # refused before its first attempt: every slot is infra, not run
    assert [r["outcome"] for r in records(ctx)] == ["infra"] * 3
    assert all(str(r["reason"]).startswith("not run: cannot run here: ") for r in records(ctx))
    reason = str(runner.state.quarantined)
    assert reason.startswith("cannot run here: ") and "PowerOnState 0" in reason and "fix: " in reason
    assert "PowerOnState 1" in reason and "\n" not in reason
    (not_ready,) = events(ctx, "not_ready")
    assert "power-on state" in not_ready["problems"][0]
    assert "set off" not in fake.device.requests  # nothing was switched


def test_an_auto_off_shorter_than_the_campaign_refuses_and_one_longer_only_warns(tmp_path: Path) -> None:
    short = _host(PlugSettings(power_on=PowerOnState.LAST, auto_off_s=60.0))  # 3 attempts of 30 s: 90 s
    ctx = seam_context(seam_book(tmp_path / "a", attempts=3), tmp_path / "a", short.clock)
    assert "auto-off" in str(run_host(short, ctx).state.quarantined) and short.attempts_run == 0
    long = _host(PlugSettings(power_on=PowerOnState.LAST, auto_off_s=7200.0))
    ctx = seam_context(seam_book(tmp_path / "b", attempts=3), tmp_path / "b", long.clock)
    assert run_host(long, ctx).state.quarantined is None and long.attempts_run == 3
    assert any("auto-off" in str(e.get("message")) for e in events(ctx, "warning"))


def test_a_power_limit_below_the_gpus_refuses_a_cell_that_raises_the_limit_counts(tmp_path: Path) -> None:
    fake = _host(PlugSettings(power_limit_w=650.0))
    ctx = seam_context(seam_book(tmp_path / "a", attempts=1), tmp_path / "a", fake.clock)
    assert run_host(fake, ctx).state.quarantined is None  # 650 W above the card's 600 W
    raised = _host(PlugSettings(power_limit_w=650.0))
    hot = cell("hot", 0)
    hot = type(hot)(**{**hot.__dict__, "gpu": GpuPolicy(power_limit_w=700.0)})
    ctx = seam_context(seam_book(tmp_path / "b", hot, attempts=1), tmp_path / "b", raised.clock)
    reason = str(run_host(raised, ctx).state.quarantined)
    assert "power limit" in reason and "700 W" in reason and raised.attempts_run == 0


def test_a_device_that_reports_nothing_refuses_nothing(tmp_path: Path) -> None:
    fake = FakeHost(VirtualClock(), "plug", script=("clean",))
    ctx = seam_context(seam_book(tmp_path, attempts=1), tmp_path, fake.clock)
    assert run_host(fake, ctx).state.quarantined is None and fake.attempts_run == 1
    assert "read settings" in fake.device.requests
