"""Controller shards as Slurm jobs: ``invoke campaign --shards N --slurm-partition P`` below the
command line.

Submitting reads and checks everything first (the playbook, the inventory, the power ports,
the slices: a bad argument submits nothing), then makes the campaign folder with what every
shard reads back (``shards.json``: the inventory, the playbook, the slices of
``campaign/shard_slices.py``) and one script per shard, and submits one ``sbatch`` job per
shard (no GPU, ``--requeue``, output appended into the shard's own sub-folder). A submission
Slurm refuses part-way cancels the jobs already submitted: a campaign runs whole or not at all.

A shard's job runs ``reprofleet campaign --run-shard FOLDER/shard-I``: :func:`shard_request`
builds the campaign request of that shard's slice, into that sub-folder, under the campaign's
one id. A run whose sub-folder already holds a campaign.json (Slurm requeued the job, or it was
resubmitted) resumes it: the same slice, never another's; ``SLURM_RESTART_COUNT`` > 0 tells the
run that Slurm ended its earlier run, so the leases that run left on its hosts are taken over
(runner/link.py) and nobody else's. ``invoke report FOLDER`` pools the sub-folders' records.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from reprofleet.campaign.pipeline import DEFAULT_PLAYBOOK, CampaignRequest
from reprofleet.campaign.preflight import check_playbook_against_hosts, chosen_hosts
from reprofleet.campaign.run import new_campaign_id
from reprofleet.campaign.settings import ControllerConfig
from reprofleet.campaign.shard_slices import ShardOf, slice_hosts
from reprofleet.errors import InputError, Location, ReprofleetError, UsageError
from reprofleet.inventory import SOURCE_JOINER
from reprofleet.playbook import load_playbook
from reprofleet.power.ports import outlet_keys
from reprofleet.records.private_files import make_folder
from reprofleet.records.store import write_atomic
from reprofleet.scheduler import JobSpec, SlurmClient

__all__ = ["SHARDS_FILE", "ShardSet", "ShardSubmission", "job_lines", "shard_request", "submit_shards",
           "wait_for_jobs"]

SHARDS_FILE = "shards.json"
_SHARD_PREFIX = "shard-"


@dataclass(frozen=True)
class ShardSubmission:
    """What ``invoke campaign --shards`` asked for."""

    inventory: str
    playbook: str | None
    reports: Path
    count: int
    partition: str
    account: str | None = None
    time: str | None = None
    attempts: int | None = None
    limit: str | None = None


@dataclass(frozen=True)
class ShardSet:
    """A sharded campaign as its folder keeps it (``shards.json``): what each shard's job reads."""

    campaign: str
    inventory: str
    playbook: str
    limit: str | None
    attempts: int | None
    slices: tuple[tuple[str, ...], ...]
    partition: str
    jobs: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        return len(self.slices)

    def to_json(self) -> dict[str, Any]:
        return {"campaign": self.campaign, "inventory": self.inventory, "playbook": self.playbook, "limit": self.limit,
                "attempts": self.attempts, "partition": self.partition, "jobs": list(self.jobs),
                "slices": [list(names) for names in self.slices]}

    @classmethod
    def read(cls, folder: Path) -> "ShardSet":
        path = folder / SHARDS_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(Location(str(path)), f"cannot read the shards of this campaign: {exc}") from None
        slices = data.get("slices") if isinstance(data, dict) else None
        if not isinstance(slices, list) or not slices or not all(
                isinstance(s, list) and s and all(isinstance(n, str) for n in s) for s in slices):
            raise InputError(Location(str(path), None, "slices"), "expected a list of non-empty lists of host names")
        for key in ("campaign", "inventory", "playbook", "partition"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise InputError(Location(str(path), None, key), "expected text")
        return cls(data["campaign"], data["inventory"], data["playbook"], data.get("limit"), data.get("attempts"),
                   tuple(tuple(s) for s in slices), data["partition"], tuple(str(j) for j in data.get("jobs") or ()))

    def write(self, folder: Path) -> None:
        write_atomic(folder / SHARDS_FILE, json.dumps(self.to_json(), indent=2) + "\n")


def submit_shards(asked: ShardSubmission, client: SlurmClient, python: str = sys.executable,
                  workdir: Path | None = None) -> tuple[Path, ShardSet]:
    """Check everything, make the campaign folder, submit one job per shard; the folder and the
    set with its job ids. Nothing is submitted when any check fails."""
    if not asked.partition:
        raise UsageError("--shards needs --slurm-partition P: the partition the controller jobs run in "
                         "(they need no GPU)")
    book = load_playbook(asked.playbook or DEFAULT_PLAYBOOK, attempts_override=asked.attempts)
    _, inventory = chosen_hosts(book, asked.inventory, asked.limit)
    slices = slice_hosts([h.name for h in inventory.hosts], asked.count, outlet_keys(inventory.hosts))
    check_playbook_against_hosts(book, inventory.hosts, asked.reports)
    campaign = new_campaign_id(book)
    folder = make_folder(asked.reports / campaign)
    chosen = ShardSet(campaign, _absolute(asked.inventory), str(Path(book.path).resolve()), asked.limit,
                      asked.attempts, slices, asked.partition)
    chosen.write(folder)
    specs = [_job(folder, chosen, ShardOf(campaign, i, chosen.count, names), asked, python, workdir or Path.cwd())
             for i, names in enumerate(slices, 1)]
    jobs: list[str] = []
    try:
        for spec in specs:
            jobs.append(client.submit(spec))
    except ReprofleetError:
        for job in jobs:  # a campaign runs whole or not at all
            client.cancel(job)
        raise
    submitted = ShardSet(chosen.campaign, chosen.inventory, chosen.playbook, chosen.limit, chosen.attempts,
                         chosen.slices, chosen.partition, tuple(jobs))
    submitted.write(folder)
    return folder, submitted


def _absolute(inventory: str) -> str:
    """Each inventory source as an absolute path when it is a file here (a job's cwd may differ)."""
    return SOURCE_JOINER.join(str(Path(s).resolve()) if Path(s).exists() else s for s in inventory.split(SOURCE_JOINER))


def _job(folder: Path, chosen: ShardSet, shard: ShardOf, asked: ShardSubmission, python: str,
         workdir: Path) -> JobSpec:
    sub = make_folder(folder / shard.folder_name)
    script = folder / f"{shard.folder_name}.sbatch"
    write_atomic(script, "#!/bin/sh\n"
                 f"# reprofleet: controller shard {shard.index} of {shard.count} of campaign {chosen.campaign}; its hosts:\n"
                 f"# {' '.join(shard.hosts)}\n"
                 "# a requeued run resumes this shard's folder (invoke campaign --shards, README 'Shards')\n"
                 f"exec {shlex.quote(python)} -m reprofleet campaign --run-shard {shlex.quote(str(sub))}\n")
    script.chmod(0o700)
    return JobSpec(name=f"reprofleet-{chosen.campaign}-shard-{shard.index}-of-{shard.count}", partition=asked.partition,
                   script=script, output=sub / "slurm-%j.out", chdir=workdir, account=asked.account, time=asked.time)


def job_lines(folder: Path, chosen: ShardSet) -> list[str]:
    """What a person is told once the jobs are in: each job and its hosts, how to watch, how to report."""
    lines = [f"campaign {chosen.campaign}: {chosen.count} controller shard(s) submitted to partition "
             f"{chosen.partition}, records under {folder}"]
    lines += [f"  shard {i}: slurm job {job}, hosts {', '.join(names)}"
              for i, (job, names) in enumerate(zip(chosen.jobs, chosen.slices), 1)]
    lines += [f"watch:  squeue -j {','.join(chosen.jobs)}; tail -f {folder}/shard-*/slurm-*.out",
              f"report: invoke report {folder}"]
    return lines


def shard_request(shard_folder: Path, config: ControllerConfig, env: Mapping[str, str]) -> CampaignRequest:
    """The campaign request of the shard whose sub-folder is ``shard_folder`` (``--run-shard``),
    as its Slurm job runs it: its slice, its sub-folder (resumed when it holds a campaign.json)."""
    folder = shard_folder.resolve().parent
    chosen = ShardSet.read(folder)
    index = _index(shard_folder, chosen)
    restarts = env.get("SLURM_RESTART_COUNT", "0").strip() or "0"
    shard = ShardOf(chosen.campaign, index, chosen.count, chosen.slices[index - 1], job=env.get("SLURM_JOB_ID", ""),
                    requeued=restarts.isdigit() and int(restarts) > 0)
    resume = shard_folder if (shard_folder / "campaign.json").is_file() else None
    return CampaignRequest(chosen.inventory, None if resume else chosen.playbook, config, folder.parent,
                           attempts=chosen.attempts, resume=resume, limit=chosen.limit, shard=shard)


def _index(shard_folder: Path, chosen: ShardSet) -> int:
    name = shard_folder.resolve().name
    number = name[len(_SHARD_PREFIX):] if name.startswith(_SHARD_PREFIX) else ""
    if not number.isdigit() or not 1 <= int(number) <= chosen.count:
        raise UsageError(f"--run-shard {shard_folder}: not one of this campaign's shard folders "
                         f"(shard-1 .. shard-{chosen.count})")
    return int(number)


def wait_for_jobs(client: SlurmClient, jobs: tuple[str, ...], sleep: Callable[[float], None], poll_s: float,
                  told: Callable[[str], None], bound_s: float | None = None) -> dict[str, str]:
    """Poll every job until each has ended (or Slurm forgot it); job id -> its last state in words.
    A requeued job is not ended: it runs again. ``bound_s``: give up waiting after this long."""
    last: dict[str, str] = {}
    waited = 0.0
    while True:
        running = 0
        for job in jobs:
            state = client.job(job)
            words = "ended (Slurm no longer knows it)" if state is None else state.words()
            if last.get(job) != words:
                told(words if state is not None else f"job {job} {words}")
            last[job] = words
            running += state is not None and not state.ended
        if not running or (bound_s is not None and waited >= bound_s):
            return last
        sleep(poll_s)
        waited += poll_s
