"""One host's faults stay that host's, and nothing the controller decided is lost.

Uses the scripted host runner of tests/support/scripted_runner.py (no SSH): what it writes to
attempts.jsonl and events.jsonl is what a real campaign writes.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from reprofleet.errors import CredentialError
from reprofleet.model import Outcome, Record
from reprofleet.records.store import read_records
from tests.support.scripted_runner import ScriptedRecovery, ScriptedRunner, book, cell, context, records_of


def _events(runner: ScriptedRunner) -> list[dict[str, Any]]:
    return [json.loads(line) for line in runner.ctx.directory.events.read_text().splitlines()]


def _wedge_on_disk_then_credential_error(ctx: Any) -> ScriptedRecovery:
    """Recovery needs the PDU's secret, and its variable is unset."""

    def on_disk_first(record: Record) -> None:
        assert [r["attempt"] for r in read_records(ctx.directory.attempts)][-1] == record.attempt, \
            "the wedge must be on disk before recovery starts"

    return ScriptedRecovery(raises=CredentialError("WS01_PDU is not set"), before=on_disk_first)


def test_a_wedge_is_on_disk_before_recovery_and_a_credential_error_quarantines_only_this_host(tmp_path: Path) -> None:
    playbook = book(tmp_path, cell("ref", 0), attempts=3)
    ctx = context(playbook, tmp_path)
    runner = ScriptedRunner(ctx, [(playbook.cells[0], i) for i in range(3)],
                            lambda name, index: (Outcome.WEDGE, "cuda_graph_capture"),
                            recovery=_wedge_on_disk_then_credential_error(ctx))
    runner.run()
    records = records_of(ctx.directory)
    assert [r["outcome"] for r in records] == ["wedge", "infra", "infra"]  # the wedge kept, the rest not run
    assert records[0]["forensics"] == {"recovery": "failed", "error": "CredentialError: WS01_PDU is not set"}
    quarantined = [e for e in _events(runner) if e["event"] == "quarantined"]
    assert "CredentialError" in quarantined[0]["reason"] and "Traceback" in quarantined[0]["traceback"]
    assert all(r["reason"].startswith("not run: unexpected error") for r in records[1:])


def _at_the_second(error: BaseException) -> Any:
    """A fault in the second attempt (index 1): ``error`` raised where the attempt would run."""
    def fault(cell: Any, index: int) -> None:
        if index == 1:
            raise error
    return fault


def test_an_unexpected_exception_is_an_infra_record_with_its_traceback_never_a_silent_stop(tmp_path: Path) -> None:
    playbook = book(tmp_path, cell("ref", 0), attempts=3)
    ctx = context(playbook, tmp_path)
    runner = ScriptedRunner(ctx, [(playbook.cells[0], i) for i in range(3)], lambda name, index: (Outcome.CLEAN, "ready"),
                            fault=_at_the_second(KeyError("a bug in our own code")))
    runner.run()
    outcomes = [(r["outcome"], r["reason"]) for r in records_of(ctx.directory)]
    assert outcomes[0] == ("clean", "scripted")
    assert outcomes[1] == ("infra", "unexpected error: KeyError: 'a bug in our own code'")
    assert [o for o, _ in outcomes] == ["clean", "infra", "infra"]
    assert any("KeyError" in e.get("traceback", "") for e in _events(runner))


def test_a_full_disk_stops_the_whole_campaign_not_just_this_host(tmp_path: Path) -> None:
    playbook = book(tmp_path, cell("ref", 0), attempts=3)
    ctx = context(playbook, tmp_path)
    runner = ScriptedRunner(ctx, [(playbook.cells[0], i) for i in range(3)], lambda name, index: (Outcome.CLEAN, "ready"),
                            fault=_at_the_second(OSError(28, "No space left on device")))
    runner.run()
    assert ctx.stop.is_set() and ctx.failure and "No space left on device" in ctx.failure
    assert [r["outcome"] for r in records_of(ctx.directory)] == ["clean"]
    assert not runner.state.quarantined  # the host did nothing wrong


def test_a_reboot_is_amended_with_its_forensics_and_stays_one_record(tmp_path: Path) -> None:
    playbook = book(tmp_path, cell("ref", 0), attempts=1)
    ctx = context(playbook, tmp_path)

    recovery = ScriptedRecovery(forensics={"findings": [{"line": "watchdog: BUG: soft lockup"}]})
    runner = ScriptedRunner(ctx, [(playbook.cells[0], 0)], lambda name, index: (Outcome.REBOOT, "cuda_graph_capture"),
                            recovery=recovery)
    runner.run()
    lines = ctx.directory.attempts.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["amends"] == json.loads(lines[0])["attempt"]
    (record,) = records_of(ctx.directory)
    assert record["outcome"] == "reboot" and record["forensics"]["findings"][0]["line"].startswith("watchdog")
