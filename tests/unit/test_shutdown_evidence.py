"""An orderly reboot is not a reproduction (issue 32, item 2b-c): the agent reads the previous
boot's whole journal for systemd's shutdown and who asked for it (collectors/shutdown_evidence.py),
the controller parses it (remote/replies.py), and the judge reads the same evidence in records,
also in records written before the agent said so (model/shutdown.py). The fixtures are real
programs' wordings; tests/fixtures/agent/shutdown/README.md names each one's source."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

from reprofleet.errors import AgentError
from reprofleet.model import Judging, Outcome, Role, orderly_shutdown
from reprofleet.model.shutdown import UNKNOWN_ASKER
from reprofleet.remote.replies import ShutdownEvidence, parse_postboot
from reprofleet.records.reader import attempts_of
from reprofleet.verdicts.tally import judge_records

from tests.support import agent_harness as h
from tests.support import paths

shutdown_evidence = h.collector("shutdown_evidence")
FIXTURES = paths.FIXTURES / "agent" / "shutdown"
KERNEL_LOG = paths.FIXTURES / "agent" / "postboot" / "prev-boot-kernel.log"
UPGRADE = "unattended-upgrades (its automatic reboot after an upgrade)"


def journal(name: str) -> List[str]:
    return [line for line in (FIXTURES / name).read_text().splitlines() if not line.startswith("#")]


EXPECTED = {
    "reboot-by-person-v255.journal": (True, None),
    "reboot-by-person-v257.journal": (True, "systemctl (PID 41873, unit session-7.scope) asked systemd-logind for a reboot"),
    "reboot-by-unattended-upgrades.journal": (True, UPGRADE),
    "power-button.journal": (True, "the power key"),
    "old-systemd-kernel-tail.log": (True, None),
    "watchdog-only.journal": (False, None),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_agent_reads_how_each_boot_ended_and_who_asked(name: str) -> None:
    found = shutdown_evidence.evidence(journal(name))
    assert (found["orderly"], found["by"]) == EXPECTED[name]
    assert all(line in journal(name) for line in found["lines"])
    assert not any("watchdog did not stop" in line for line in found["lines"])


def test_a_boot_whose_kernel_log_froze_has_no_shutdown() -> None:
    assert shutdown_evidence.evidence(KERNEL_LOG.read_text().splitlines()) == {"orderly": False, "by": None, "lines": []}


def test_a_panic_is_never_an_orderly_shutdown_whatever_else_the_boot_says() -> None:
    found = shutdown_evidence.evidence(journal("reboot-by-person-v257.journal"), panicked=True)
    assert found["orderly"] is False and found["by"] is None and found["lines"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_controller_reads_an_older_records_kernel_tail_as_the_agent_reads_the_journal(name: str) -> None:
    """Both sides hold the same wordings: the judge's reading of bare lines (an older record's
    ``tail``) agrees with the agent's on whether the boot ended in order."""
    orderly, _ = EXPECTED[name]
    words = orderly_shutdown({"tail": journal(name), "findings": []})
    assert (words is not None) is orderly
    if words is not None:
        assert words.startswith(UNKNOWN_ASKER)


def test_the_controller_takes_the_agents_word_and_a_panic_overrides_it() -> None:
    said = shutdown_evidence.evidence(journal("reboot-by-unattended-upgrades.journal"))
    assert orderly_shutdown({"shutdown": said}) == UPGRADE
    assert orderly_shutdown({"shutdown": {**said, "by": None}}) == UNKNOWN_ASKER
    # the agent read the whole journal and found no shutdown: a tail cannot overrule it
    assert orderly_shutdown({"shutdown": {"orderly": False, "by": None, "lines": []},
                             "tail": journal("reboot-by-person-v255.journal")}) is None
    panic = {"tags": ["oops", "panic"], "line": "Kernel panic - not syncing: softlockup: hung tasks"}
    assert orderly_shutdown({"shutdown": said, "findings": [panic]}) is None
    assert orderly_shutdown({"shutdown": said, "pstore": [{"file": "dmesg-ramoops-0", "findings": [panic]}]}) is None
    assert orderly_shutdown(None) is None and orderly_shutdown({"recovery": "failed", "error": "x"}) is None


def fake_journalctl(bin_dir: Path, kernel: Path, whole: Path) -> Path:
    """``-k -b -1``: the kernel log; ``-b -1 ... -n N``: the whole journal's end; ``-b -1 -t A -t B``:
    the lines of those identifiers. Comment lines (#) are no journal lines."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "journalctl"
    script.write_text(f"""#!/bin/sh
case "$*" in
  *"-k -b -1"*) grep -v '^#' "{kernel}";;
  *" -n "*) grep -v '^#' "{whole}";;
  *"-t systemd-logind"*) grep -E ' (systemd-logind|unattended-upgrades?)(\\[[0-9]+\\])?: ' "{whole}" || true;;
  *) echo "unexpected: $*" >&2; exit 2;;
esac
""")
    script.chmod(0o755)
    return bin_dir


def test_postboot_says_how_the_previous_boot_ended_and_the_controller_parses_it(tmp_path: Path) -> None:
    bin_dir = fake_journalctl(tmp_path / "bin", KERNEL_LOG, FIXTURES / "reboot-by-unattended-upgrades.journal")
    rc, lines, _ = h.run_agent(tmp_path, "postboot", "--pstore", str(tmp_path / "no-pstore"),
                               env=h.agent_env({"PATH": f"{bin_dir}:/usr/bin:/bin"}))
    assert rc == 0
    shutdown = lines[0]["previous_boot"]["shutdown"]
    assert (shutdown["orderly"], shutdown["by"], shutdown["available"]) == (True, UPGRADE, True)
    assert "2026-03-02T06:34:41+0000 ws01 unattended-upgrade[2431]: Found /var/run/reboot-required, rebooting" \
        in shutdown["lines"]
    parsed = parse_postboot("ws01", lines[0]).previous_boot.shutdown
    assert isinstance(parsed, ShutdownEvidence) and parsed.orderly and parsed.by == UPGRADE
    assert orderly_shutdown({"shutdown": parsed.as_json()}) == UPGRADE


def test_a_journal_that_cannot_be_read_is_no_orderly_shutdown(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "journalctl").write_text('#!/bin/sh\necho "Data from the specified boot (-1) is not available: '
                                        'No such boot ID in journal" >&2; exit 1\n')
    (bin_dir / "journalctl").chmod(0o755)
    rc, lines, _ = h.run_agent(tmp_path, "postboot", "--pstore", str(tmp_path / "no-pstore"),
                               env=h.agent_env({"PATH": f"{bin_dir}:/usr/bin:/bin"}))
    shutdown = lines[0]["previous_boot"]["shutdown"]
    assert rc == 0 and shutdown["orderly"] is False and shutdown["available"] is False and "No such boot" in shutdown["reason"]


def test_an_older_agents_postboot_reads_as_unknown_and_a_malformed_one_breaks_the_protocol() -> None:
    older = {"k": "postboot", "boot_id": "b", "previous_boot": {"available": True, "findings": [], "tail": []}}
    assert parse_postboot("ws01", older).previous_boot.shutdown == ShutdownEvidence()
    bad = json.loads(json.dumps(older))
    bad["previous_boot"]["shutdown"] = {"orderly": "yes"}
    with pytest.raises(AgentError, match="orderly"):
        parse_postboot("ws01", bad)


def record(outcome: str, forensics: Dict[str, Any] | None, **extra: Any) -> Dict[str, Any]:
    return {"campaign": "c", "attempt": f"a-{outcome}-{len(json.dumps(forensics))}", "host": "ws01", "cell": "ref",
            "outcome": outcome, "last_phase": "cuda_graph_capture", "phases": None, "reason": "", "schema": 1,
            "forensics": forensics, **extra}


def test_the_judge_excludes_a_reboot_or_wedge_whose_previous_boot_ended_in_order() -> None:
    judging = Judging()
    said = shutdown_evidence.evidence(journal("reboot-by-unattended-upgrades.journal"))
    for outcome in ("reboot", "wedge"):
        verdict = attempts_of([record(outcome, {"shutdown": said})])[0].classified(judging)
        assert verdict.role is Role.EXCLUDED
        assert verdict.reason == f"orderly reboot ({UPGRADE}): not a reproduction"
    # a record written before the agent read the whole journal: its kernel tail still shows it
    old = attempts_of([record("reboot", {"tail": journal("old-systemd-kernel-tail.log"), "findings": []})])[0].classified(judging)
    assert old.role is Role.EXCLUDED and old.reason.startswith(f"orderly reboot ({UNKNOWN_ASKER}")
    # a watchdog reset, and a panic, stay reproductions
    assert attempts_of([record("reboot", {"tail": journal("watchdog-only.journal")})])[0].classified(judging).role is Role.REPRODUCTION
    panicked = {"shutdown": said, "findings": [{"tags": ["panic"], "line": "Kernel panic - not syncing: hung_task"}]}
    assert attempts_of([record("reboot", panicked)])[0].classified(judging).role is Role.REPRODUCTION
    assert judging.classify(Outcome.REBOOT, orderly=None).role is Role.REPRODUCTION


def test_the_tally_counts_an_orderly_reboot_out_of_the_rate_with_its_reason() -> None:
    said = shutdown_evidence.evidence(journal("power-button.journal"))
    judged = judge_records(attempts_of([record("reboot", {"shutdown": said}), record("wedge", {"tail": []})]),
                           lambda r: Judging())
    assert [(j.outcome, j.role) for j in judged] == [("reboot", Role.EXCLUDED), ("wedge", Role.REPRODUCTION)]
    assert judged[0].reason == "orderly reboot (the power key): not a reproduction"
