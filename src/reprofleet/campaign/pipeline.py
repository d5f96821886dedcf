"""``invoke campaign`` and ``invoke demo`` below the command line: read and check everything,
then describe the plan (a dry run) or run it.

The command line builds a :class:`CampaignRequest` from its flags and config, and is the
:class:`CampaignView`: what is said while the campaign gets going (a refused cell, an outlet
that reads off, the dry run's plan) goes through it as it happens, and so does the live view,
which the view also arms against stop signals. The answer is data: a :class:`DryRun`, or the
:class:`~reprofleet.campaign.run.CampaignResult`. Its report is written by ``report/write.py``
(a sibling layer: the command line calls one after the other).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, ContextManager, Mapping, Protocol

from reprofleet.campaign import resume, run as run_mod
from reprofleet.campaign.facts import readiness_lines
from reprofleet.campaign.preflight import (
    check_playbook_against_hosts,
    chosen_hosts,
    observe_only_refusals,
    power_states_at_start,
)
from reprofleet.campaign.run import CampaignPlan, CampaignResult
from reprofleet.campaign.settings import ControllerConfig
from reprofleet.campaign.shard_slices import ShardOf
from reprofleet.errors import UsageError
from reprofleet.inventory import Inventory
from reprofleet.model import Playbook
from reprofleet.playbook import load_playbook
from reprofleet.power.base import PowerState
from reprofleet.runner.recovery import recovery_factory

DEFAULT_PLAYBOOK = "playbooks/sm120-hostwedge.yml"  # a new campaign's, when none is named
Progress = Callable[..., None]  # run_campaign's progress: told each host's changes as they happen


@dataclass(frozen=True)
class CampaignRequest:
    """What a person asked for on the command line, with the config it runs under."""

    inventory: str
    playbook: str | None  # None: not named (a new campaign runs DEFAULT_PLAYBOOK, a resume its stored copy)
    config: ControllerConfig
    reports: Path  # where a new campaign's folder goes (a resume: beside the folder it continues)
    attempts: int | None = None  # per cell and host, over the playbook's
    dry_run: bool = False
    resume: Path | None = None
    accept_new: bool | None = None  # --accept-new-host-keys (None: the config's)
    overrides: Mapping[str, Any] | None = None  # settings over the config (--break-lease, --bring-up, the demo's timings)
    check_hosts: bool = False  # with dry_run: ask every host whether it can run its plan
    limit: str | None = None  # an Ansible host pattern over the playbook's own
    resume_changed: bool = False  # --resume-changed: a resume may run a changed playbook, PoC or inventory
    shard: ShardOf | None = None  # a controller shard's run (campaign/shards.py): its slice, into its sub-folder


class CampaignView(Protocol):
    """Where what the campaign says while it gets going is shown (the command line's terminal)."""

    def text(self, text: str) -> None:
        """The dry run's plan, and with ``check_hosts`` each host's answer."""

    def refused(self, line: str) -> None:
        """A cell an observe-only host will not run, before the campaign starts."""

    def outlet_off(self, line: str) -> None:
        """A host whose outlet reads off at the start."""

    def warning(self, line: str) -> None:
        """A caveat said before anything runs (a resume whose playbook could not be checked)."""

    def live(self, planned: Mapping[str, int | None], budget: int | None,
             stop: threading.Event) -> ContextManager[Progress]:
        """The live view while the campaign runs (a host's count is None when a search picks its
        slots at run time; ``budget``: a search's attempts in all); stop signals set ``stop``."""


@dataclass(frozen=True)
class Readiness:
    """``--check-hosts``: one line per host, and whether every host can run its plan."""

    lines: tuple[str, ...]
    ready: bool


@dataclass(frozen=True)
class DryRun:
    """The plan, the hosts it was made for, and with ``check_hosts`` their answers; nothing ran."""

    plan: CampaignPlan
    whole: Inventory  # the inventory as read, before the patterns chose
    playbook_hosts: str | None
    limit: str | None
    readiness: Readiness | None = None

    def to_json(self) -> dict[str, Any]:
        """``invoke campaign --dry-run --json`` (its ``chosen``, ``plan`` and ``readiness``)."""
        chosen = {"inventory": str(self.whole.source), "of": len(self.whole.hosts),
                  "chosen": [h.name for h in self.plan.hosts], "playbook_hosts": self.playbook_hosts or None,
                  "limit": self.limit}
        readiness = None if self.readiness is None else {"ready": self.readiness.ready,
                                                         "lines": list(self.readiness.lines)}
        return {"chosen": chosen, "plan": self.plan.to_json(), "readiness": readiness}


def run_or_plan(request: CampaignRequest, view: CampaignView) -> DryRun | CampaignResult:
    """Load and validate everything (nothing is contacted before it all holds), then describe
    the plan (``dry_run``) or run it on every chosen host. A resume runs what its folder ran
    (campaign/resume.py), or is refused before anything is contacted or created."""
    # A resume's folder first (a typo creates nothing); the playbook next: the env_secrets it
    # names are kept from a dynamic inventory's script.
    directory = resume.campaign_folder(request.resume) if request.resume is not None else None
    if directory is not None:
        book, stored = resume.resumed_playbook(directory, request.playbook, DEFAULT_PLAYBOOK, request.attempts)
    else:
        book, stored = load_playbook(request.playbook or DEFAULT_PLAYBOOK, attempts_override=request.attempts), None
    whole, inventory = chosen_hosts(book, request.inventory, request.limit)
    if request.shard is not None:
        inventory = _slice_of(inventory, request.shard)
    inputs = resume.current_inputs(book, whole)
    request.config.configure_power()  # before the preflight builds every driver: its timings are those of invoke.yaml
    report_root = request.reports
    done: dict[tuple[str, str], int] = {}
    campaign_id = None
    changes: tuple[resume.InputChange, ...] = ()
    if directory is not None:
        resumed = resume.check(directory, book, stored, inputs, accept=request.resume_changed,
                               playbook_given=request.playbook is not None, attempts=request.attempts)
        if resumed.warning:
            view.warning(resumed.warning)
        changes = resumed.changes
        done = run_mod.completed_counts(directory, book, inputs.poc.sha256)
        campaign_id = directory.root.name if request.shard is None else request.shard.campaign
        report_root = directory.root.parent if request.shard is None else request.reports
    elif request.shard is not None:
        campaign_id = request.shard.campaign
    # the playbook asked for its secrets by name; where each value lives is the operator's to say
    book = replace(book, env_secrets=request.config.env_secrets(book.env_secrets))
    check_playbook_against_hosts(book, inventory.hosts, report_root)
    plan = run_mod.make_plan(book, inventory.hosts, campaign_id, done, inputs=inputs, changes=changes,
                             shard=request.shard)
    if request.dry_run:
        return _dry_run(request, plan, book, whole, inventory, view)
    for line in observe_only_refusals(book, inventory.hosts):  # the dry run's plan text carries these itself
        view.refused(line)
    for name, states in power_states_at_start(inventory.hosts, report_root).items():  # every PDU/BMC answers
        if PowerState.OFF in states:
            view.outlet_off(f"{name}: its outlet reads off; it is switched on before its first attempt if this "
                            "campaign saw it answer or switched it off (a resume), or with --bring-up")
    settings = request.config.run_settings(request.accept_new, request.overrides)
    if request.shard is not None:  # its records and leases name the shard; a requeued run takes over its own leases
        settings = replace(settings, controller=request.shard.controller, own_leases_ended=request.shard.requeued)
    observers = request.config.notify_observers()
    stop = threading.Event()
    ladder = plan.playbook.ladder  # a search's slots are chosen at run time: no per-host plan to count down
    planned: dict[str, int | None] = {h: None if ladder else len(v) for h, v in plan.per_host.items()}
    with view.live(planned, ladder.budget_attempts if ladder else None, stop) as progress:
        # through the module: it is the seam the CLI's tests replace the run at
        return run_mod.run_campaign(plan, settings, report_root, progress=progress, stop=stop,
                                    recovery_factory=recovery_factory, observers=observers)


def _slice_of(inventory: Inventory, shard: ShardOf) -> Inventory:
    """The inventory's hosts of this shard's slice; a host of the slice the inventory no longer
    chooses is refused (the slice was fixed at submission: it is never recomputed here)."""
    by_name = {host.name: host for host in inventory.hosts}
    missing = [name for name in shard.hosts if name not in by_name]
    if missing:
        raise UsageError(f"shard {shard.index} of campaign {shard.campaign}: {', '.join(missing)} of its slice "
                         f"{'is' if len(missing) == 1 else 'are'} no longer chosen by {inventory.source}; "
                         "nothing was run (restore the inventory, or submit a new campaign)")
    return replace(inventory, hosts=tuple(by_name[name] for name in shard.hosts))


def _dry_run(request: CampaignRequest, plan: CampaignPlan, book: Playbook, whole: Inventory, inventory: Inventory,
             view: CampaignView) -> DryRun:
    if request.limit or book.hosts:
        chosen_by = " and ".join(f"{what} {pattern!r}" for what, pattern in (("the playbook's hosts:", book.hosts),
                                                                         ("--limit", request.limit)) if pattern)
        view.text(f"{chosen_by} chose {len(inventory.hosts)} of the {len(whole.hosts)} hosts of {whole.source}")
    view.text(run_mod.describe_plan(plan))
    readiness = None
    if request.check_hosts:
        lines, ok = readiness_lines(plan, request.config.run_settings(request.accept_new, request.overrides))
        readiness = Readiness(tuple(lines), ok)
        view.text("\n".join(lines))
    return DryRun(plan, whole, book.hosts, request.limit, readiness)
