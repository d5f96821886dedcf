"""The Slurm client's commands and parsers, on the golden output of a real Slurm 22.05.8
(tests/fixtures/slurm/README.md says how each file was made)."""

from __future__ import annotations

import json

import pytest

from reprofleet.errors import SchedulerDenied, SchedulerError
from reprofleet.scheduler import NodeReasons, SlurmClient, clean_text, parse_sinfo_json, parse_squeue, select_nodes
from reprofleet.scheduler.client import parse_config
from reprofleet.scheduler.nodes import gres_count
from tests.support.fake_slurm import GoldenReplay, golden

OURS = "reprofleet:c-20261206-ab12 taken for attempts"
WEDGE = "reprofleet:c-20261206-ab12 wedge in cuda_graph_capture, attempt 5f1c, power cycle under way"


@pytest.mark.parametrize(("capture", "node", "state", "flags", "reason"), [
    ("sinfo_idle", "gpu01", "idle", set(), ""),
    ("sinfo_job_running", "gpu01", "mixed", set(), ""),
    ("sinfo_draining", "gpu01", "mixed", {"DRAIN"}, OURS),
    ("sinfo_drained", "gpu01", "idle", {"DRAIN"}, OURS),
    ("sinfo_drained", "gpu02", "idle", {"DRAIN"}, "fan noise, ticket 4411"),
    ("sinfo_down", "gpu01", "down", {"DRAIN"}, WEDGE),
    ("sinfo_drained_after_down", "gpu01", "down", {"DRAIN"}, OURS),
    ("sinfo_after_resume", "gpu01", "idle", {"NOT_RESPONDING"}, ""),
])
def test_every_captured_state_and_flag_combination_is_read(capture: str, node: str, state: str, flags: set[str],
                                                           reason: str) -> None:
    found = {n.name: n for n in parse_sinfo_json(golden(capture)["stdout"])}[node]
    assert (found.state, set(found.flags), found.reason) == (state, flags, reason)
    assert found.held_by_someone is bool(flags & {"DRAIN"} or state == "down")
    assert found.runs_jobs is (state == "mixed")


def test_a_node_carries_its_gres_features_partitions_and_address() -> None:
    gpu01, gpu02 = parse_sinfo_json(golden("sinfo_idle")["stdout"])
    assert gpu01.gres == ("gpu:rtxpro6000:2",) and gres_count(gpu01.gres) == 2 and gres_count(gpu02.gres) == 1
    assert gpu01.features == ("blackwell", "ib") and gpu02.features == ("blackwell",)
    assert gpu01.partitions == ("gpu",) and gpu02.partitions == ("gpu", "debug")
    assert gpu01.address == "localhost"
    assert gpu02.state_words == "IDLE"


def test_sinfo_json_ignores_its_partition_filter_so_the_client_selects() -> None:
    listed = parse_sinfo_json(golden("sinfo_json_partition_ignored")["stdout"])
    assert [n.name for n in listed] == ["gpu01", "gpu02"]  # 22.05 returned both for --partition debug
    assert [n.name for n in select_nodes(listed, partition="debug")] == ["gpu02"]
    assert [n.name for n in select_nodes(listed, feature="ib")] == ["gpu01"]
    assert [n.name for n in select_nodes(listed, names=["gpu02", "nosuch"])] == ["gpu02"]


def test_a_job_name_that_holds_the_separator_is_read_whole() -> None:
    (job,) = parse_squeue(golden("squeue_one_running")["stdout"])
    assert (job.job_id, job.user, job.state, job.name) == ("2", "slurmtest", "RUNNING", "user|job with spaces")
    assert parse_squeue(golden("squeue_empty")["stdout"]) == ()


def test_the_client_runs_the_captured_commands_and_reads_their_answers() -> None:
    replay = GoldenReplay("sinfo_idle", "squeue_one_running", "drain_ok", "down_ok", "ping", "config")
    client = SlurmClient(replay)
    assert [n.name for n in client.nodes()] == ["gpu01", "gpu02"]
    assert [j.job_id for j in client.jobs_on("gpu01")] == ["2"]
    client.drain("gpu01", OURS)
    client.down("gpu01", WEDGE)
    assert client.ping().endswith(" is UP")
    config = client.config()
    assert config["SlurmUser"] == "root(0)" and config["AuthInfo"].startswith("socket=")
    assert replay.calls[2] == ("scontrol", "update", "nodename=gpu01", "state=drain", f"reason={OURS}")


@pytest.mark.parametrize(("capture", "call", "error", "words"), [
    ("drain_denied", lambda c: c.drain("gpu01", "reprofleet:x"), SchedulerDenied, "Invalid user id"),
    ("resume_idle", lambda c: c.resume("gpu01"), SchedulerError, "Invalid node state specified"),
    ("unknown_node", lambda c: c.drain("nosuch", "x"), SchedulerError, "Invalid node name specified"),
    ("bogus_state", lambda c: c._update("gpu01", "state=bogus"), SchedulerError, "Invalid input: state=bogus"),
    ("drain_no_reason", lambda c: c._update("gpu01", "state=drain"), SchedulerError, "You must specify a reason"),
])
def test_slurm_refusals_are_typed_errors_in_slurms_own_words(capture: str, call: object, error: type, words: str) -> None:
    client = SlurmClient(GoldenReplay(capture))
    with pytest.raises(error) as raised:
        call(client)  # type: ignore[operator]
    assert words in str(raised.value) and "scontrol update" in str(raised.value)
    assert (error is SchedulerDenied) is isinstance(raised.value, SchedulerDenied)


def test_a_stopped_slurmctld_is_an_error_although_sinfo_exits_0() -> None:
    with pytest.raises(SchedulerError, match="Slurm reported: Unspecified error"):
        SlurmClient(GoldenReplay("sinfo_controller_down")).nodes()
    with pytest.raises(SchedulerError, match="is DOWN"):
        SlurmClient(GoldenReplay("ping_controller_down")).ping()


def test_a_dead_munge_is_named_although_scontrol_says_slurmctld_is_down() -> None:
    with pytest.raises(SchedulerError) as raised:
        SlurmClient(GoldenReplay("ping_munge_down")).ping()
    assert "munge does not answer: scontrol: error: Munge encode failed" in str(raised.value)
    with pytest.raises(SchedulerError, match="Did you start munged"):
        SlurmClient(GoldenReplay("munge_down")).munge("/tmp/slurmlab/munge/munge.socket")


def test_without_slurmdbd_the_admin_level_is_unknown_not_refused() -> None:
    assert SlurmClient(GoldenReplay("sacctmgr_no_dbd")).admin_level("root") is None


def test_scontrol_show_config_is_read_as_key_value_lines() -> None:
    config = parse_config(golden("config")["stdout"])
    assert config["SlurmdTimeout"] == "300 sec" and config["SlurmctldParameters"] == "(null)"


@pytest.mark.parametrize(("text", "words"), [
    ("not json", "not JSON"),
    ("{}", "no 'nodes' list"),
    (json.dumps({"nodes": [{"name": "gpu01", "state": "idle", "state_flags": "DRAIN"}]}), "nodes[0] (gpu01).state_flags"),
    (json.dumps({"nodes": [{"name": "gpu01", "state": 3}]}), "nodes[0] (gpu01).state: expected text"),
    (json.dumps({"nodes": [], "errors": [{"description": "Unable to contact slurm controller"}]}), "Unable to contact"),
])
def test_a_document_sinfo_would_not_print_is_one_line_naming_the_field(text: str, words: str) -> None:
    with pytest.raises(SchedulerError, match=None) as raised:
        parse_sinfo_json(text)
    assert words in str(raised.value) and "\n" not in str(raised.value)


def test_a_squeue_line_with_too_few_fields_is_named_by_its_number() -> None:
    with pytest.raises(SchedulerError, match="line 2"):
        parse_squeue("1|u|RUNNING|a\ngarbage\n")


def test_reasons_know_their_own_campaign_and_no_other() -> None:
    ours, other = NodeReasons("c-20261206-ab12"), NodeReasons("c-20261206-ab1")
    assert ours.taken() == OURS and ours.held_for_attempts(OURS)
    assert ours.wedged("cuda_graph_capture", "5f1c") == WEDGE and ours.ours(WEDGE)
    assert not other.ours(OURS) and not other.held_for_attempts(OURS)
    assert not ours.ours("fan noise, ticket 4411") and not ours.ours("reprofleet:c-20261206-ab12x taken for attempts")
    assert not ours.held_for_attempts(WEDGE)


def test_host_text_in_a_reason_is_cleaned_and_bounded() -> None:
    hostile = 'capture\n"; state=resume reason=x\x1b[2J' + "A" * 500
    cleaned = clean_text(hostile)
    assert len(cleaned) == 64 and set(cleaned) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-/@+?")
    reason = NodeReasons("c1").wedged(hostile, "a b")
    assert "=" not in reason and "\n" not in reason and '"' not in reason and "attempt a?b," in reason
