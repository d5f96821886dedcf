"""The grace a silent host gets to reset itself, decided from its facts (runner/self_reset_grace.py),
at the host seam in virtual time: skipped only where every way back is known to be closed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reprofleet.campaign.run import make_plan
from reprofleet.clock import VirtualClock
from reprofleet.model import CampaignEvent
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_log_lines, read_records
from reprofleet.runner.self_reset_grace import self_reset_grace_s
from tests.support.seam_host import FakeHost, events, records, run_fake_campaign, run_host, seam_book, seam_context, seam_settings
from tests.support.fleet_campaign import write_playbook

GRACE_S = 10.0
CLOSED = {"watchdog": {"armed": False, "why": "no hardware watchdog device", "devices": []},
          "panic_sysctls": {"values": {"panic": 0, "softlockup_panic": 0, "hardlockup_panic": 0, "nmi_watchdog": 0,
                                       "hung_task_panic": 0, "panic_on_oops": 0, "watchdog_thresh": 10},
                            "absent": []},
          "kdump_loaded": False}


def _with(**changes: Any) -> dict[str, Any]:
    """The closed host's facts with some changed: ``panic=1`` changes a sysctl, ``watchdog=...``
    or ``kdump_loaded=...`` a fact."""
    facts = {**CLOSED, "panic_sysctls": {"values": dict(CLOSED["panic_sysctls"]["values"]), "absent": []}}
    for name, value in changes.items():
        if name in facts["panic_sysctls"]["values"]:
            facts["panic_sysctls"]["values"][name] = value
        else:
            facts[name] = value
    return facts


def _seconds_to_the_cycle(tmp_path: Path, facts: dict[str, Any] | None) -> tuple[float, dict[str, Any]]:
    """A wedge on a host with ``facts``: virtual seconds from its declaration to the outlet's
    "off", and the grace event."""
    clock = VirtualClock()
    fake = FakeHost(clock, "gr", script=("wedge", "clean"), boot_delay_s=0.5)
    if facts is not None:
        fake.facts = facts
    ctx = seam_context(seam_book(tmp_path, attempts=2, attempt_timeout=30, boot=15), tmp_path, clock,
                       reboot_grace_s=GRACE_S)
    stamps: dict[str, float] = {}
    real_event = ctx.event

    def stamped(host: str, what: CampaignEvent, **fields: Any) -> None:
        key = "off" if fields.get("to") == "off" else CampaignEvent(what).value
        stamps.setdefault(key, clock.monotonic())
        real_event(host, what, **fields)

    ctx.event = stamped  # type: ignore[method-assign]
    run_host(fake, ctx)
    assert [r["outcome"] for r in records(ctx)] == ["wedge", "clean"]
    (grace,) = events(ctx, "self_reset_grace")
    return stamps["off"] - stamps["wedge"], grace


def test_a_host_that_cannot_reset_itself_is_cycled_at_once(tmp_path: Path) -> None:
    seconds, grace = _seconds_to_the_cycle(tmp_path, CLOSED)
    assert seconds < 1.0
    assert grace["grace_s"] == 0.0 and grace["configured_s"] == GRACE_S
    assert grace["message"] == "grace 0 s: no hardware watchdog, kernel.panic=0, no lockup panics, no kdump"


@pytest.mark.parametrize("facts, words", [
    (None, "unknown whether a hardware watchdog is armed (the facts do not say), kernel.panic"),
    (_with(watchdog={"armed": True, "why": "watchdog0 (iTCO_wdt) is active, timeout 30 s"}),
     "an armed hardware watchdog: watchdog0 (iTCO_wdt) is active, timeout 30 s"),
    (_with(watchdog={"armed": None, "why": "ipmi_watchdog is loaded: the BMC's watchdog timer cannot be read here"}),
     "unknown whether a hardware watchdog is armed (ipmi_watchdog is loaded"),
    (_with(panic=1), "kernel.panic=1 (reboots 1 s after a panic)"),
    (_with(panic=-1), "kernel.panic=-1 (reboots at once after a panic)"),
    (_with(softlockup_panic=1), "lockup panics on (softlockup_panic=1)"),
    (_with(hardlockup_panic=1, nmi_watchdog=1), "lockup panics on (hardlockup_panic=1)"),
    (_with(hung_task_panic=1), "lockup panics on (hung_task_panic=1)"),
    (_with(kdump_loaded=True), "kdump is loaded"),
    (_with(kdump_loaded=None), "unknown whether kdump is loaded"),
], ids=["no-facts", "watchdog-armed", "watchdog-unknown", "panic-reboots", "panic-at-once", "softlockup-panic",
        "hardlockup-panic", "hung-task-panic", "kdump", "kdump-unknown"])
def test_a_host_that_may_reset_itself_keeps_the_grace(tmp_path: Path, facts: dict[str, Any] | None,
                                                      words: str) -> None:
    seconds, grace = _seconds_to_the_cycle(tmp_path, facts)
    assert seconds >= GRACE_S
    assert grace["grace_s"] == GRACE_S and words in grace["message"]


def test_a_hard_lockup_panic_without_the_nmi_watchdog_cannot_fire(tmp_path: Path) -> None:
    seconds, grace = _seconds_to_the_cycle(tmp_path, _with(hardlockup_panic=1, nmi_watchdog=0))
    assert seconds < 1.0 and grace["grace_s"] == 0.0


def test_a_kernel_without_a_lockup_detector_cannot_panic_on_a_lockup() -> None:
    facts = {**CLOSED, "panic_sysctls": {"values": {"panic": 0, "softlockup_panic": None, "hardlockup_panic": None,
                                                    "nmi_watchdog": None, "hung_task_panic": None},
                                         "absent": ["softlockup_panic", "hardlockup_panic", "nmi_watchdog",
                                                    "hung_task_panic"]}}
    assert self_reset_grace_s(facts, 30.0)[0] == 0.0
    unreadable = {**facts, "panic_sysctls": {"values": {"panic": 0, "softlockup_panic": None}, "absent": []}}
    assert self_reset_grace_s(unreadable, 30.0) == (30.0, "grace 30 s: unknown kernel.softlockup_panic, "
                                                          "kernel.hardlockup_panic, kernel.hung_task_panic")


def test_a_panic_that_reboots_later_than_the_grace_is_said_not_hidden() -> None:
    _, why = self_reset_grace_s(_with(panic=60, softlockup_panic=1), 30.0)
    assert why.startswith("grace 30 s: kernel.panic=60 (reboots 60 s after a panic); a lockup panic's reboot comes "
                          "up to 80 s after the freeze, later than this grace (raise reboot_grace_s for this host)")


CELLS = ("  - name: plain\n"
         "  - name: lockup-panic\n"
         "    host_debug: {softlockup_panic: true, panic: 1}\n")


def test_the_sysctls_a_cell_applied_decide_not_the_hosts_own(tmp_path: Path) -> None:
    """A host that cannot reset itself gets the grace back under a lockup-panic cell."""
    clock = VirtualClock()
    fake = FakeHost(clock, "hd-g", script=("wedge", "clean", "wedge", "clean"), boot_delay_s=0.5)
    fake.facts = CLOSED
    book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=30, cells=CELLS, extra="order: sequential\n")
    plan = make_plan(load_playbook(book), [fake.host])
    (result,) = run_fake_campaign(plan, [fake], seam_settings(tmp_path, reboot_grace_s=5.0), tmp_path / "reports", clock)
    found = sorted(read_records(result.directory.attempts), key=lambda r: (r["cell"] != "plain", r["attempt_index"]))
    assert [(r["cell"], r["outcome"]) for r in found] == [
        ("plain", "wedge"), ("plain", "clean"), ("lockup-panic", "wedge"), ("lockup-panic", "clean")]
    graces = [e for e in read_log_lines(result.directory.events) if e["event"] == "self_reset_grace"]
    assert [(g["attempt"], g["grace_s"]) for g in graces] == [(found[0]["attempt"], 0.0), (found[2]["attempt"], 5.0)]
    assert "lockup panics on (softlockup_panic=1)" in graces[1]["message"]


def test_a_host_that_froze_between_attempts_keeps_the_sysctls_its_boot_was_given(tmp_path: Path) -> None:
    """The lockup-panic cell's attempt ended, then the host froze before the next one could
    start: that attempt's record has no sysctls, but the kernel still has the cell's."""
    clock = VirtualClock()
    fake = FakeHost(clock, "hd-f", script=("freeze-after", "clean"), boot_delay_s=0.5)
    fake.facts = CLOSED
    cells = "  - name: lockup-panic\n    host_debug: {softlockup_panic: true, panic: 1}\n"
    book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=30, cells=cells)
    plan = make_plan(load_playbook(book), [fake.host])
    (result,) = run_fake_campaign(plan, [fake], seam_settings(tmp_path, reboot_grace_s=5.0), tmp_path / "reports", clock)
    events_seen = read_log_lines(result.directory.events)
    assert any(e["event"] == "unreachable" for e in events_seen)
    (grace,) = [e for e in events_seen if e["event"] == "self_reset_grace"]
    assert grace["grace_s"] == 5.0 and "lockup panics on (softlockup_panic=1)" in grace["message"]
