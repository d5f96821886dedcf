"""A controller whose lease another controller broke after its last attempt restores nothing at
its end (issue 34 item 6): the first fenced refusal stops it, so the other campaign's
lockup-to-panic sysctls and clock lock stay as that campaign set them. Decided at the host seam
in virtual time; the agent's own refusal of each subcommand is tests/agent/test_agent_lease.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reprofleet.campaign.run import make_plan
from reprofleet.clock import VirtualClock
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_log_lines, read_records
from tests.support.fleet_campaign import write_playbook
from tests.support.seam_host import FakeHost, run_fake_campaign, seam_settings

CELLS = "  - name: lockup-panic\n    host_debug: {softlockup_panic: true, panic: 1}\n"
THEIRS = {"controller": "other-laptop", "campaign": "night-9", "pid": 77, "token": "the-other-controllers",
          "renewed": 0.0, "ttl_s": 3600.0}


def test_a_controller_fenced_after_its_last_attempt_restores_nothing_of_the_other_campaigns(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "taken-late", script=("clean",) * 2)
    book = write_playbook(tmp_path / "book", attempts=1, attempt_timeout=30, cells=CELLS)
    plan = make_plan(load_playbook(book), [fake.host])

    def another_controller_breaks_the_lease_and_applies_its_own(host: str, **fields: Any) -> None:
        if fields.get("outcome") and fake.lease_holder is not None and fake.lease_holder["token"] != THEIRS["token"]:
            fake.lease_holder = dict(THEIRS, renewed=clock.monotonic())
            fake.host_debug = {**fake.host_debug, "softlockup_panic": 1, "panic": 30}
            fake.policy = {"graphics_clocks": [180, 2400]}

    (result,) = run_fake_campaign(plan, [fake], seam_settings(tmp_path), tmp_path / "reports", clock,
                                  progress=another_controller_breaks_the_lease_and_applies_its_own)
    assert [r["outcome"] for r in read_records(result.directory.attempts)] == ["clean"]
    assert fake.host_debug["softlockup_panic"] == 1 and fake.host_debug["panic"] == 30  # theirs, untouched
    assert fake.policy == {"graphics_clocks": [180, 2400]}
    said = [e["event"] for e in read_log_lines(result.directory.events)]
    assert "fenced" in said
    assert not {"policy_restored", "policy_restore_failed", "host_debug_restored",
                "host_debug_restore_failed"} & set(said)
    assert fake.lease_holder is not None and fake.lease_holder["token"] == THEIRS["token"]  # not given back by us
