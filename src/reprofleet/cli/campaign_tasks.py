"""``invoke campaign``, ``invoke demo`` and ``invoke plan``: flags in, one call below, the terminal out.

A campaign is two calls because its two halves are sibling layers: ``campaign/pipeline.py``
runs it (or describes it: ``--dry-run``) and ``report/write.py`` writes its report. This
module is the pipeline's view (the live table, the lines said while it gets going), and it
turns the result into the summary, the exit status and, with ``--json``, one document.
"""

from __future__ import annotations

import os

import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from invoke import Context, task

from reprofleet.cli.args import need_inventory, whole_number
from reprofleet.cli.config import DEMO_OVERRIDES, controller, reports, sim_dir
from reprofleet.cli.exits import BadArgument, ExitStatus, handled
from reprofleet.cli.output import console, json_document, say, stderr_console
from reprofleet.cli.signals import install_stop_handlers
from reprofleet.cli.terminal_text import cell, plain, safe_print

if TYPE_CHECKING:
    from rich.console import Console

    from reprofleet.campaign.pipeline import CampaignRequest
    from reprofleet.campaign.run import CampaignResult


def _install_stop_handlers(stop: threading.Event) -> None:
    install_stop_handlers(stop, lambda text: safe_print(stderr_console(), cell(text, "yellow")))


class _Terminal:
    """The campaign pipeline's view (campaign/pipeline.py's ``CampaignView``). With ``--json`` the
    live view and every line go to stderr, and the dry run's text is not shown: stdout keeps the
    one document."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.console = stderr_console() if as_json else console()

    def text(self, text: str) -> None:
        if not self.as_json:
            print(plain_lines(text))

    def refused(self, line: str) -> None:
        safe_print(stderr_console(), cell(line, "yellow"))

    def outlet_off(self, line: str) -> None:
        safe_print(self.console, cell(line, "yellow"))

    def warning(self, line: str) -> None:
        safe_print(stderr_console(), cell(f"warning: {line}", "yellow"))

    @contextmanager
    def live(self, planned: Mapping[str, int | None], budget: int | None,
             stop: threading.Event) -> Iterator[Callable[..., None]]:
        # lazy: cli.progress loads the verdicts and scipy: 0.86 s, paid once a campaign starts
        from reprofleet.cli.progress import LiveProgress

        _install_stop_handlers(stop)
        with LiveProgress(planned.keys(), planned, self.console, budget=budget) as progress:
            yield progress


def run_and_report(c: Any, hosts: str, playbook: str | None, attempts: int | None, dry_run: bool,
                   resume: str | None, accept_new: bool | None,
                   overrides: dict[str, Any] | None = None, check_hosts: bool = False,
                   limit: str | None = None, as_json: bool = False, resume_changed: bool = False) -> ExitStatus:
    """Load and validate everything, then run (or describe) the campaign and summarize it.
    ``playbook`` None: not named (a new campaign's default, or a resume's stored copy);
    ``check_hosts`` (with ``dry_run``): also ask every host whether it can run its plan;
    ``limit``: an Ansible host pattern choosing which of the inventory's hosts run;
    ``as_json``: stdout carries one JSON document at the end, the live view and tables go to stderr;
    ``resume_changed``: a resume may run a changed playbook, PoC or inventory."""
    # lazy: the runner, power drivers, paramiko and scipy: 0.92 s that `invoke --list` never pays
    from reprofleet.campaign import pipeline

    request = pipeline.CampaignRequest(hosts, playbook, controller(c), reports(c), attempts, dry_run,
                                       Path(resume) if resume else None, accept_new, overrides, check_hosts, limit,
                                       resume_changed)
    return run_request(request, as_json)


def run_request(request: "CampaignRequest", as_json: bool = False) -> ExitStatus:
    """Run (or describe) one campaign request, write its report, and summarize it."""
    from reprofleet.campaign import pipeline

    view = _Terminal(as_json)
    outcome = pipeline.run_or_plan(request, view)
    if isinstance(outcome, pipeline.DryRun):
        ready = outcome.readiness is None or outcome.readiness.ready
        status = ExitStatus.OK if ready else ExitStatus.SOME_HOSTS_FAILED
        if as_json:
            json_document({"dry_run": True, "exit_status": int(status), **outcome.to_json()})
        return status
    # the files and the exit status first: nothing printed below can cost them
    report_path, judgement = write_campaign_report(outcome.directory.root, view.console,
                                                   f"campaign {outcome.campaign_id}")
    html_path = report_path.with_suffix(".html")
    for line in (f"records: {outcome.directory.attempts}", f"report:  {report_path}",
                 *([f"html:    {html_path}"] if html_path.exists() else [])):
        safe_print(view.console, cell(line))
    status = campaign_status(outcome, stderr_console())
    if as_json:
        json_document({"dry_run": False, "exit_status": int(status), "result": outcome.to_json(),
                       "report": str(report_path), "html": str(html_path) if html_path.exists() else None,
                       "judgement": judgement.to_json() if judgement is not None else None})
    return status


def write_campaign_report(folder: Path, console: "Console", title: str) -> tuple[Path, Any]:
    """report.md and report.html beside the records, the summary and verdict tables on the
    terminal; the report's path and the judgement (None: no attempt was recorded)."""
    # lazy: report.write loads matplotlib and scipy: about 1 s, paid once a campaign ends
    from reprofleet.report.write import campaign_report

    written = campaign_report(folder, title)  # written before anything is drawn (print_report never raises)
    if written.judgement is not None:
        # lazy: cli.progress loads the verdicts and scipy (0.86 s alone; report.write loaded them by now)
        from reprofleet.cli.progress import print_report

        print_report(console, written, title, apart=True)
    assert written.markdown is not None
    return written.markdown, written.judgement


def campaign_status(result: "CampaignResult", err: "Console") -> ExitStatus:
    """The exit status of a campaign, with one line on stderr per reason it is not 0. The status is
    decided before a line is drawn, and a line that cannot be drawn is logged (a reason is a host's
    text: shown inert, never as markup)."""
    status, lines = _status_and_lines(result)
    for line in lines:
        safe_print(err, line)
    return status


def _status_and_lines(result: "CampaignResult") -> tuple[ExitStatus, list[Any]]:
    if result.failure:
        lines: list[Any] = [cell(f"campaign stopped: {result.failure}", "red")]
        # exactly what was and was not restored
        lines += [cell(f"  {host}: {said}") for host, said in sorted(result.given_back.items())]
        return ExitStatus.ERROR, lines
    if result.interrupted:
        return ExitStatus.INTERRUPTED, []
    lines = [cell(f"{host}: quarantined: {why}", "red") for host, why in sorted(result.quarantined.items())]
    lines += [cell(f"cell {name}: no attempt could be judged on any host (every record is infra)", "yellow")
              for name in result.unjudged]
    if result.quarantined:
        return ExitStatus.SOME_HOSTS_FAILED, lines
    return (ExitStatus.NOT_JUDGED if result.unjudged else ExitStatus.OK), lines


@dataclass(frozen=True)
class ShardFlags:
    """``--shards`` and the flags that go with it, as typed."""

    shards: str
    partition: str
    account: str
    time: str
    wait: bool


def submit_shards(c: Any, hosts: str, playbook: str | None, attempts: str | None, limit: str | None,
                  flags: ShardFlags, other_mode: bool) -> ExitStatus:
    """``--shards N --slurm-partition P``: check everything, submit, say the job ids and how to
    watch them; with ``--wait``, until every job has ended. A bad argument submits nothing."""
    from reprofleet.campaign.shards import ShardSubmission, job_lines, wait_for_jobs
    from reprofleet.campaign.shards import submit_shards as submit
    from reprofleet.scheduler import SlurmClient

    if not flags.shards:
        raise BadArgument("--slurm-partition, --slurm-account, --slurm-time and --wait go with --shards N")
    if other_mode:
        raise BadArgument("--shards submits a new campaign: not with --dry-run, --resume or --check-hosts "
                          "(a shard's job resumes its own slice by itself)")
    count = whole_number("shards", flags.shards)
    assert count is not None
    client = SlurmClient()
    asked = ShardSubmission(hosts, playbook, reports(c), count, flags.partition, flags.account or None,
                            flags.time or None, whole_number("attempts", attempts), limit)
    folder, chosen = submit(asked, client)
    terminal = console()
    for line in job_lines(folder, chosen):
        safe_print(terminal, cell(line))
    if not flags.wait:
        return ExitStatus.OK
    import time

    last = wait_for_jobs(client, chosen.jobs, time.sleep, SHARD_POLL_S, lambda line: safe_print(terminal, cell(line)))
    safe_print(terminal, cell(f"report: invoke report {folder}"))
    # a job Slurm forgot (MinJobAge) ended in a state no one saw: not counted as completed
    return ExitStatus.OK if all(w.startswith(f"job {j} completed") for j, w in last.items()) \
        else ExitStatus.SOME_HOSTS_FAILED


SHARD_POLL_S = 10.0  # how often --wait asks Slurm (scontrol show job, once per job)


def plain_lines(text: str) -> str:
    """A multi-line text of the controller's (the dry run's plan) with the host values in it inert."""
    return "\n".join(plain(line) for line in text.split("\n"))


@task(help={
    "hosts": "Ansible inventory (YAML, INI, or any source ansible-inventory reads), or slurm:PARTITION (Slurm's "
             "nodes; give -i twice to add an Ansible inventory with their login and power)",
    "playbook": "campaign YAML (default playbooks/sm120-hostwedge.yml; with --resume: the copy the folder keeps)",
    "attempts": "attempts per cell per host (overrides the playbook)",
    "dry-run": "print the plan and contact nothing",
    "resume": "continue the campaign in this report folder, with the playbook it ran (a different playbook, PoC "
              "or inventory is refused)",
    "resume-changed": "with --resume: run a changed playbook, PoC or inventory all the same (an event says what "
                      "changed; changed cells get new identities)",
    "accept-new-host-keys": "record unknown host keys instead of refusing them",
    "break-lease": "take hosts whose lease another campaign holds (say so only when that campaign is dead)",
    "bring-up": "power-cycle hosts that do not answer at the start even if this campaign never saw them answer",
    "check-hosts": "with --dry-run: ask every host (changing nothing) whether it can run its plan",
    "limit": "Ansible host pattern: only these hosts run (e.g. 'blackwell:!ws03', 'ws0[1-2]*', '@retry-file')",
    "json": "stdout: one JSON document at the end, the summary and verdicts (with --dry-run: the plan); the live "
            "view goes to stderr (docs/schema/campaign.schema.json)",
    "shards": "submit the campaign as N controller jobs to Slurm (sbatch, no GPU, --requeue), each on a disjoint "
              "slice of the hosts, into one campaign folder (one sub-folder per shard); needs --slurm-partition",
    "slurm-partition": "with --shards: the partition the controller jobs run in",
    "slurm-account": "with --shards: the Slurm account the controller jobs are charged to",
    "slurm-time": "with --shards: each controller job's time limit, in Slurm's syntax (e.g. 2-00:00:00)",
    "wait": "with --shards: wait until every controller job has ended, saying each job's state as it changes",
    "run-shard": "run one shard's slice into its sub-folder (what each submitted job runs; a requeued job resumes)",
})
@handled
def campaign(c: Context, hosts: str = "", playbook: str = "", attempts: str | None = None,
             dry_run: bool = False, resume: str | None = None, resume_changed: bool = False,
             accept_new_host_keys: bool = False, break_lease: bool = False, bring_up: bool = False,
             check_hosts: bool = False, limit: str = "", json_: bool = False, shards: str = "",
             slurm_partition: str = "", slurm_account: str = "", slurm_time: str = "", wait: bool = False,
             run_shard: str = "") -> ExitStatus:
    """Run a reproduction campaign on every host of an inventory."""
    if run_shard:
        from reprofleet.campaign.shards import shard_request

        return run_request(shard_request(Path(run_shard), controller(c), os.environ))
    if shards or slurm_partition or slurm_account or slurm_time or wait:
        return submit_shards(c, need_inventory(hosts), playbook or None, attempts, limit or None,
                             ShardFlags(shards, slurm_partition, slurm_account, slurm_time, wait),
                             dry_run or resume is not None or check_hosts)
    hosts = need_inventory(hosts)
    if check_hosts and not dry_run:
        raise BadArgument("--check-hosts goes with --dry-run (a campaign checks its hosts anyway)")
    if resume_changed and not resume:
        raise BadArgument("--resume-changed goes with --resume (it lets a resume run a changed playbook)")
    overrides = {**({"break_leases": True} if break_lease else {}), **({"bring_up": True} if bring_up else {})}
    return run_and_report(c, hosts, playbook or None, whole_number("attempts", attempts), dry_run, resume,
                          accept_new_host_keys or None, overrides or None, check_hosts=check_hosts,
                          limit=limit or None, as_json=json_, resume_changed=resume_changed)


@task(help={"count": "number of simulated hosts (default 3)", "playbook": "demo campaign YAML",
            "attempts": "attempts per host and cell (default: the playbook's)",
            "json": "stdout: one JSON document at the end, as campaign --json (docs/schema/demo.schema.json)"})
@handled
def demo(c: Context, count: str = "3", playbook: str = "playbooks/demo.yml", attempts: str = "",
         json_: bool = False) -> ExitStatus:
    """Simulated fleet up, a campaign over it, the summary, fleet down."""
    # lazy: the simulator's control and its rich tables: 42 ms that only sim.* and demo use
    from reprofleet.sim import simctl

    folder = sim_dir(c)
    hosts_wanted, attempts_wanted = whole_number("count", count), whole_number("attempts", attempts)
    # the demo's report is audited (issue 33 item 9): report/write.py re-checks every claim against the
    # records and a contradiction ends the demo with status 1, naming the claim (REPROFLEET_AUDIT=0: not)
    os.environ.setdefault("REPROFLEET_AUDIT", "1")
    fleet = simctl.up(hosts_wanted or 3, None, folder)
    try:
        return run_and_report(c, str(fleet.inventory_path), playbook, attempts_wanted, False, None, None,
                              DEMO_OVERRIDES, as_json=json_)
    finally:
        simctl.down(folder)


@task(iterable=["truth"],
      help={"baseline": "reproduction rate to rule out, e.g. 0.3 (with --hosts/--playbook: the rate assumed, default 0.3)",
            "confidence": "level of the clean-run bound (default 0.95)",
            "fixed-rate": "SPRT: the rate that counts as fixed (default a tenth of the baseline)",
            "alpha": "SPRT: chance of a false 'fixed' (default 0.05)",
            "beta": "SPRT: chance of a false 'still reproduces' (default 0.2)",
            "hosts": "Ansible inventory: estimate this campaign's length and power cycles (with --playbook)",
            "playbook": "campaign YAML (with --hosts)",
            "attempt-s": "typical seconds per attempt (default: the playbook's attempt timeout, an upper bound)",
            "campaigns": "with --hosts/--playbook: simulated campaigns per number of what the verdicts can show "
                         "(default 100; the power search uses half as many per size)",
            "json": "print the plan as one JSON document (docs/schema/plan.schema.json)",
            "ratio": "with --hosts/--playbook: rate ratios (cell / reference) whose false 'fixed' is shown, "
                     "comma-separated (default 0.1,0.333)",
            "truth": "a search:/bisect: playbook: a true curve to simulate against, repeatable: onset=2700,slope=0.25,"
                     "floor=0.01 or p=0/0/0.02/0.3 (per level); a bisection change=0.26.0,bad=0.4,good=0 (default: "
                     "stated in the output)"})
@handled
def plan(c: Context, baseline: str | None = None, confidence: str = "0.95", fixed_rate: str | None = None,
         alpha: str = "0.05", beta: str = "0.2", hosts: str | None = None, playbook: str | None = None,
         attempt_s: str | None = None, campaigns: str | None = None, ratio: str | None = None,
         json_: bool = False, truth: list[str] | None = None) -> ExitStatus:
    """Clean attempts that rule out a rate, what an SPRT saves, or a campaign's length and power cycles."""
    # lazy: the estimates, their simulations, scipy and paramiko: 1.4 s that `invoke --list` never pays
    from reprofleet.campaign import planning

    request = planning.PlanRequest(controller(c), baseline, confidence, fixed_rate, alpha, beta, hosts, playbook,
                                   attempt_s, campaigns, ratio, tuple(truth or []))
    answer = planning.plan(request, lambda line: print(line, file=sys.stderr if json_ else sys.stdout))
    say(json_, answer.document, lambda: answer.text)
    return ExitStatus.OK
