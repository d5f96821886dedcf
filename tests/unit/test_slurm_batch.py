"""The batch side of the Slurm client (scheduler/batch.py), on the golden output of a real
Slurm 22.05 (tests/fixtures/slurm/capture_shards.py; README.md there says how)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprofleet.errors import SchedulerError
from reprofleet.scheduler import JobSpec, SlurmClient
from reprofleet.scheduler.batch import parse_sbatch_parsable, parse_show_job, sbatch_argv
from tests.support.fake_slurm import GoldenReplay, golden


def test_the_sbatch_line_built_for_a_shard_is_the_one_slurm_took() -> None:
    captured = golden("sbatch_shard")
    flags = dict(w[2:].split("=", 1) for w in captured["command"] if w.startswith("--") and "=" in w)
    spec = JobSpec(name=flags["job-name"], partition=flags["partition"], script=Path(captured["command"][-1]),
                   output=Path(flags["output"]), chdir=Path(flags["chdir"]))
    assert list(sbatch_argv(spec)) == captured["command"]
    assert SlurmClient(GoldenReplay("sbatch_shard")).submit(spec) == "1"


def test_account_and_time_go_on_the_line_only_when_given() -> None:
    spec = JobSpec("j", "ctl", Path("/s"), Path("/o"), Path("/w"), account="lab", time="2-00:00:00")
    argv = sbatch_argv(spec)
    assert "--account=lab" in argv and "--time=2-00:00:00" in argv and "--requeue" in argv
    assert not any(w.startswith(("--gres", "--gpus")) for w in argv)


def test_a_multi_cluster_answer_and_junk_are_read_as_slurm_prints_them() -> None:
    assert parse_sbatch_parsable("1234;lab\n") == "1234"
    with pytest.raises(SchedulerError, match="expected a job id"):
        parse_sbatch_parsable("Submitted batch job 12\n")


@pytest.mark.parametrize("name, state, restarts", [("show_job_running", "RUNNING", 0),
                                                   ("show_job_requeued", "COMPLETING", 1),
                                                   ("show_job_restarted", "RUNNING", 1),
                                                   ("show_job_cancelled", "CANCELLED", 1)])
def test_a_job_is_read_from_scontrol_show_job(name: str, state: str, restarts: int) -> None:
    job = parse_show_job(golden(name)["stdout"])
    assert (job.job_id, job.name, job.state, job.restarts) == ("1", "reprofleet-camp-shard-1-of-2", state, restarts)
    assert job.ended == (state == "CANCELLED") and job.nodes == "gpu01"


def test_a_job_slurm_does_not_know_is_none_and_a_refused_submission_says_slurms_words() -> None:
    replay = GoldenReplay("show_job_unknown", "sbatch_bad_partition")
    client = SlurmClient(replay)
    assert client.job("999999") is None
    captured = golden("sbatch_bad_partition")["command"]
    flags = dict(w[2:].split("=", 1) for w in captured if w.startswith("--") and "=" in w)
    spec = JobSpec(flags["job-name"], flags["partition"], Path(captured[-1]), Path(flags["output"]), Path(flags["chdir"]))
    with pytest.raises(SchedulerError, match="invalid partition specified: nosuch"):
        client.submit(spec)


def test_the_requeued_run_sees_its_restart_count_and_the_first_run_none() -> None:
    runs = [line for line in golden("batch_job_output")["stdout"].splitlines() if line.startswith("run ")]
    assert "SLURM_RESTART_COUNT=unset" in runs[0] and "SLURM_RESTART_COUNT=1" in runs[1]


def test_a_line_without_a_state_is_an_error_naming_what_is_missing() -> None:
    with pytest.raises(SchedulerError, match="no JobState"):
        parse_show_job("JobId=1 JobName=x Restarts=0\n")
