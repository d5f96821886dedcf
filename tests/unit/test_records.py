"""Records are appended durably, survive a torn write, and pool without duplicates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reprofleet.runner.attempt import classify_exit
from reprofleet.model import Outcome, Record
from reprofleet.records.pooling import load_pool
from reprofleet.records.store import AttemptLog, RecordError, StreamWriter, read_records


def _record(attempt: str, outcome: Outcome = Outcome.CLEAN) -> Record:
    return Record(campaign="c", attempt=attempt, controller="ctl", host="ws01", cell="default",
                  factors={"graphics_clocks": [180, 2800]}, policy={"power_limit_w": 600.0},
                  runtime={"kind": "docker"}, cache=None, attempt_index=0, attempt_in_boot=1,
                  cold_boot=True, boot_id="b", started="s", ended="e", outcome=outcome)


def test_a_record_has_every_key_the_design_names(tmp_path: Path) -> None:
    log = AttemptLog(tmp_path / "attempts.jsonl")
    log.append_record(_record("a1", Outcome.WEDGE))
    (line,) = (tmp_path / "attempts.jsonl").read_text().splitlines()
    record = json.loads(line)
    for key in ("schema", "campaign", "attempt", "controller", "host", "cell", "factors", "policy",
                "runtime", "cache", "attempt_index", "attempt_in_boot", "cold_boot", "boot_id",
                "started", "ended", "outcome", "detect_latency_s", "last_phase", "last_log_line",
                "telemetry", "forensics", "facts", "stream"):
        assert key in record, key
    assert record["outcome"] == "wedge" and record["schema"] == 1


def test_a_torn_last_line_is_skipped_but_a_torn_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    AttemptLog(path).append_record(_record("a1"))
    with open(path, "a") as handle:
        handle.write('{"schema": 1, "attem')
    assert [r["attempt"] for r in read_records(path)] == ["a1"]
    with open(path, "a") as handle:
        handle.write("\n")
    AttemptLog(path).append_record(_record("a2"))
    with pytest.raises(RecordError, match=":2:"):
        list(read_records(path))


def test_pooling_campaigns_counts_each_attempt_once(tmp_path: Path) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        log = AttemptLog(tmp_path / name / "attempts.jsonl")
        log.append_record(_record("shared"))
        log.append_record(_record(f"own-{name}"))
    assert sorted(r["attempt"] for r in load_pool([tmp_path]).records) == ["own-one", "own-two", "shared"]


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    path.write_text(json.dumps({"schema": 99, "attempt": "x"}) + "\n")
    with pytest.raises(RecordError, match="schema 99"):
        list(read_records(path))


def test_stream_lines_are_on_disk_as_soon_as_written(tmp_path: Path) -> None:
    writer = StreamWriter(tmp_path / "s.jsonl")
    writer.write('{"k":"log","line":"x"}\n')
    assert (tmp_path / "s.jsonl").read_text() == '{"k":"log","line":"x"}\n'
    writer.close()


@pytest.mark.parametrize("exit_line, outcome", [
    ({"rc": 0}, Outcome.CLEAN),
    ({"rc": 1}, Outcome.ERROR),
    ({"rc": None, "signal": 9}, Outcome.ERROR),
    ({"rc": None, "timed_out": True}, Outcome.HANG),
    ({"rc": None, "killed": True}, Outcome.INFRA),
    ({"rc": None, "lost": True}, Outcome.INFRA),
])
def test_exit_lines_classify(exit_line: dict, outcome: Outcome) -> None:
    assert classify_exit(exit_line, boot_changed=False)[0] is outcome


def test_a_lost_supervisor_on_a_new_boot_is_a_reboot() -> None:
    assert classify_exit({"lost": True}, boot_changed=True)[0] is Outcome.REBOOT


def test_resume_reruns_interrupted_attempts_but_not_judged_ones(tmp_path: Path) -> None:
    from dataclasses import replace

    from reprofleet.campaign.run import completed_counts
    from reprofleet.records.store import CampaignDir

    directory = CampaignDir(tmp_path).create()
    log = AttemptLog(directory.attempts)
    log.append_record(_record("a1", Outcome.WEDGE))
    log.append_record(_record("a2", Outcome.CLEAN))
    log.append_record(replace(_record("a3", Outcome.INFRA), reason="interrupted: the campaign was stopped"))
    log.append_record(replace(_record("a4", Outcome.INFRA), reason="host not answering at the attempt deadline"))
    assert completed_counts(directory) == {("ws01", "default"): 3}


def test_a_torn_last_line_is_cut_on_open_so_the_next_record_is_not_glued_to_it(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    AttemptLog(path).append_record(_record("a1"))
    with open(path, "a") as handle:
        handle.write('{"schema": 1, "attem')  # the controller died here
    log = AttemptLog(path)
    assert log.torn == '{"schema": 1, "attem'
    log.append_record(_record("a2"))
    log.append_record(_record("a3"))
    assert [r["attempt"] for r in read_records(path)] == ["a1", "a2", "a3"]


def test_a_whole_file_is_left_alone_on_open(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    AttemptLog(path).append_record(_record("a1"))
    before = path.read_bytes()
    assert AttemptLog(path).torn == "" and path.read_bytes() == before


def test_a_wedge_recorded_at_declaration_is_completed_by_its_amendment(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    log = AttemptLog(path)
    log.append_record(_record("w1", Outcome.WEDGE))
    log.append_record(_record("c1"))
    log.amend("w1", forensics={"findings": [{"line": "NVRM: Xid 79"}]}, outcome="reboot")
    records = {r["attempt"]: r for r in read_records(path)}
    assert list(records) == ["w1", "c1"]  # still one record per attempt, in order
    assert records["w1"]["outcome"] == "reboot" and records["w1"]["forensics"]["findings"][0]["line"] == "NVRM: Xid 79"
    assert records["w1"]["amended"] and "amended" not in records["c1"]


def test_an_amendment_of_an_attempt_never_recorded_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    AttemptLog(path).amend("ghost", outcome="wedge")
    with pytest.raises(RecordError, match=":1: amends attempt ghost"):
        list(read_records(path))


def test_the_power_cycle_budget_is_counted_from_power_jsonl(tmp_path: Path) -> None:
    from reprofleet.records.store import power_cycles_logged

    log = tmp_path / "power.jsonl"
    lines = [{"host": "ws01", "action": "off", "result": "ok"}, {"host": "ws01", "action": "on", "result": "ok"},
             {"host": "ws02", "action": "off", "result": "ok"}, {"host": "ws01", "action": "off", "result": "error"},
             {"host": "ws01", "action": "off", "result": "ok"}]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"host": "ws01", "act')
    assert power_cycles_logged(log, "ws01") == 2 and power_cycles_logged(log, "ws02") == 1
    assert power_cycles_logged(tmp_path / "none.jsonl", "ws01") == 0


def test_a_torn_line_of_many_mib_is_cut_on_open_and_the_next_records_survive(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    AttemptLog(path).append_record(_record("a1"))
    with open(path, "a") as handle:
        handle.write('{"schema": 1, "forensics": "' + "x" * (3 << 20))  # a huge record, torn
    log = AttemptLog(path)
    assert log.torn.startswith('{"schema": 1, "forensics": "xxx') and log.torn.endswith("bytes cut)")
    log.append_record(_record("a2"))
    log.append_record(_record("a3"))
    assert [r["attempt"] for r in read_records(path)] == ["a1", "a2", "a3"]


def test_a_file_that_is_one_torn_line_is_cut_to_nothing(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    path.write_text('{"schema": 1, "attem' + "y" * (2 << 20))
    AttemptLog(path).append_record(_record("a1"))
    assert [r["attempt"] for r in read_records(path)] == ["a1"]


def test_a_second_controller_on_one_campaign_folder_is_refused_with_the_first_ones_pid(tmp_path: Path) -> None:
    import os

    from reprofleet.records.store import CampaignLock, FolderBusy

    with CampaignLock(tmp_path):
        with pytest.raises(FolderBusy, match=f"another controller \\(pid {os.getpid()}\\)"):
            with CampaignLock(tmp_path):
                pass
    with CampaignLock(tmp_path):  # given back when the first ends
        pass


def test_what_a_host_sent_is_bounded_in_its_record_and_the_record_says_what_was_cut(tmp_path: Path) -> None:
    from dataclasses import replace

    path = tmp_path / "attempts.jsonl"
    log = AttemptLog(path)
    log.append_record(replace(_record("w1", Outcome.WEDGE), last_log_line="x" * 100_000))
    log.amend("w1", forensics={"findings": [{"line": "NVRM: Xid 79 " + "y" * 20_000}] * 5000})
    (record,) = read_records(path)
    assert len(record["last_log_line"]) < 4200 and record["last_log_line"].endswith("characters cut]")
    findings = record["forensics"]["findings"]
    assert len(findings) == 201 and findings[-1] == "... [4800 more items cut]"
    assert findings[0]["line"].startswith("NVRM: Xid 79") and len(findings[0]["line"]) < 4200
    assert any(c.startswith("last_log_line:") for c in record["cut"]) and any("4800 items" in c for c in record["cut"])
    assert path.stat().st_size < 12 << 20  # megabytes, not the ~100 MB the host sent


def test_an_ordinary_record_is_not_touched_by_the_bounds(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    AttemptLog(path).append_record(_record("c1"))
    (record,) = read_records(path)
    assert "cut" not in record
