"""Lockup-to-panic sysctls across boots, decided at the host seam in virtual time: a reboot
resets them, and the runner applies them again before the first attempt of the new boot.
Moved from tests/fleet/test_fleet_host_debug.py (the panic text, pstore and the by-hand restore
on a real kernel simulation stay there)."""

from __future__ import annotations

from pathlib import Path

from reprofleet.campaign.run import make_plan
from reprofleet.clock import VirtualClock
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_log_lines, read_records
from tests.support.seam_host import FakeHost, run_fake_campaign, seam_settings
from tests.support.fleet_campaign import write_playbook

CELLS = ("  - name: plain\n"
         "  - name: lockup-panic\n"
         "    host_debug: {softlockup_panic: true, panic: 1, softlockup_all_cpu_backtrace: true}\n")


def test_the_sysctls_are_applied_again_in_the_boot_after_the_panic(tmp_path: Path) -> None:
    clock = VirtualClock()
    # a lockup the kernel sees: a wedge on plain cells, a panic and a reboot under softlockup_panic
    fake = FakeHost(clock, "hd-a", script=("lockup", "clean", "lockup", "clean"), boot_delay_s=0.5,
                    self_reset_s=2.0)
    book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=30, cells=CELLS, extra="order: sequential\n")
    plan = make_plan(load_playbook(book), [fake.host])
    (result,) = run_fake_campaign(plan, [fake], seam_settings(tmp_path, reboot_grace_s=5.0), tmp_path / "reports",
                                  clock)
    records = sorted(read_records(result.directory.attempts), key=lambda r: (r["cell"] != "plain", r["attempt_index"]))
    events = read_log_lines(result.directory.events)
    assert [(r["cell"], r["outcome"]) for r in records] == [
        ("plain", "wedge"), ("plain", "clean"), ("lockup-panic", "reboot"), ("lockup-panic", "clean")]
    after = records[3]
    assert (after["cell"], after["outcome"]) == ("lockup-panic", "clean")
    assert after["boot_id"] != records[2]["boot_id"]
    assert after["host_debug"]["sysctls"]["softlockup_panic"] == 1  # the reboot had reset it to 0
    applied = [e for e in events if e["event"] == "host_debug_applied"]
    # every boot's first attempt applies (plain cells too: the host's own values, verified)
    assert [e["requested"].get("softlockup_panic") for e in applied] == [None, None, True, True]
    assert fake.host_debug["softlockup_panic"] == 0  # the host's own values back at the end
