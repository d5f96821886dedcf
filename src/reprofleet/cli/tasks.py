"""Invoke tasks: thin wrappers that parse flags and call the modules that do the work.

Project defaults live in ``invoke.yaml`` under ``reprofleet:`` (Invoke's own layering:
defaults < project file < env ``INVOKE_REPROFLEET_...`` < flags). Every task turns a
ReprofleetError into one line on stderr and an exit code (see :mod:`reprofleet.cli.exits`).
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

from invoke import Collection, Context, Task, task

from reprofleet.cli.env_config import normalise_environment
from reprofleet.cli.flags import standardise
from reprofleet.cli.exits import BadArgument, ExitStatus, document_exit_statuses, handled
from reprofleet.cli.args import RestTask
from reprofleet.cli.signals import install_stop_handlers
from reprofleet.errors import HostLeased
from reprofleet.records.store import write_atomic

if TYPE_CHECKING:
    from rich.console import Console

    from reprofleet.runner.host import RunSettings

DEFAULTS: dict[str, Any] = {
    "reports": "reports",
    "known_hosts": "~/.ssh/known_hosts",
    "accept_new_host_keys": False,
    "sample_hz": 10.0,
    "clock_threshold_mhz": 2800.0,
    "silence_s": 3.0,
    "probe_after_s": 1.0,
    "probe_interval_s": 0.5,
    "probe_timeout_s": 1.0,
    "dead_rounds": 3,
    "userspace_s": 60.0,
    "pause_cap_s": 600.0,
    "fleet_window_s": 5.0,
    "correlated_hold_s": 300.0,
    "power_cycle_budget": 20,
    "infra_streak": 3,
    "dwell_s": 10.0,
    "stability_s": 5.0,
    "reboot_grace_s": 30.0,
    "controller": None,
    "sim_dir": "/var/lib/reprofleet-sim/cli",  # not under /tmp, /root or /var/tmp: simulated hosts shadow those
}
# before Invoke reads the shell environment (its executor does, after importing these tasks)
normalise_environment(DEFAULTS)


def _console() -> "Console":
    """A terminal's own width; 160 columns in logs and CI, where rich would squeeze to 80.

    rich is imported here, not at the top: ``--help`` and ``--list`` never draw (36 ms saved)."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=160)


def _stderr_console() -> "Console":
    from rich.console import Console

    return Console(stderr=True)


def _conf(c: Any) -> dict[str, Any]:
    merged = dict(DEFAULTS)
    merged.update(dict(c.config.get("reprofleet", {}) or {}))
    return merged


def _plain(value: Any) -> Any:
    """Invoke's config proxies -> plain dicts (for code that knows nothing of Invoke)."""
    return {key: _plain(value[key]) for key in value} if hasattr(value, "keys") else value


def _configure_power(c: Any) -> None:
    """invoke.yaml's ``power:`` section over the drivers' own defaults, before any driver is built.

    Only the tasks that switch power pay for importing the drivers."""
    from reprofleet.power.defaults import configure
    from reprofleet.power.registry import DRIVERS

    configure(_plain(_conf(c).get("power")), DRIVERS)


# The demo's hosts boot in seconds: no need to wait as long as for a real workstation.
DEMO_OVERRIDES = {"dwell_s": 2.0, "stability_s": 1.0, "reboot_grace_s": 2.0,
                  "correlated_hold_s": 10.0}  # its scripted hosts may wedge in one round: held 10 s, not 300


def _settings(c: Any, accept_new: bool | None = None, overrides: dict[str, Any] | None = None) -> "RunSettings":
    from reprofleet.campaign.run import default_controller_name
    from reprofleet.runner.host import RunSettings
    from reprofleet.remote.transport import TransportSettings
    from reprofleet.liveness.watchdog import WatchdogSettings

    conf = {**_conf(c), **(overrides or {})}
    transport = TransportSettings(
        known_hosts=Path(str(conf["known_hosts"])).expanduser(),
        accept_new_host_keys=bool(conf["accept_new_host_keys"] if accept_new is None else accept_new),
    )
    return RunSettings(
        transport=transport,
        watchdog=WatchdogSettings(
            silence_s=float(conf["silence_s"]), probe_after_s=float(conf["probe_after_s"]),
            probe_interval_s=float(conf["probe_interval_s"]), probe_timeout_s=float(conf["probe_timeout_s"]),
            dead_rounds=int(conf["dead_rounds"]), userspace_s=float(conf["userspace_s"]),
            pause_cap_s=float(conf["pause_cap_s"]), fleet_window_s=float(conf["fleet_window_s"]),
            correlated_hold_s=float(conf["correlated_hold_s"])),
        controller=conf["controller"] or default_controller_name(),
        sample_hz=float(conf["sample_hz"]),
        clock_threshold_mhz=float(conf["clock_threshold_mhz"]),
        power_cycle_budget=int(conf["power_cycle_budget"]),
        infra_streak=int(conf["infra_streak"]),
        dwell_s=float(conf["dwell_s"]),
        stability_s=float(conf["stability_s"]),
        reboot_grace_s=float(conf["reboot_grace_s"]),
        break_leases=bool(conf.get("break_leases", False)),
        bring_up=bool(conf.get("bring_up", False)),
    )


def _install_stop_handlers(stop: threading.Event) -> None:
    install_stop_handlers(stop, lambda text: _stderr_console().print(f"[yellow]{text}[/]"))


def write_campaign_report(folder: Path, console: Console, title: str) -> tuple[Path, Any]:
    """The summary and verdict tables on the terminal, report.md and report.html beside the records;
    the report's path and the judgement (None: no attempt was recorded)."""
    from reprofleet.records.pooling import load_pool
    from reprofleet.cli.progress import summary_table, verdict_table
    from reprofleet.report import render_markdown
    from reprofleet.verdicts import judge

    pool = load_pool([folder]) if (folder / "attempts.jsonl").exists() else None
    report_path = folder / "report.md"
    if pool is None:
        write_atomic(report_path, f"# {title}\n\nNo attempt was recorded.\n")
        return report_path, None
    judgement = judge(pool)
    search = _search_report(pool, console)
    console.print()  # the live table's last line stays apart from the summary's title
    console.print(summary_table(judgement, title))
    console.print(verdict_table(judgement))
    _print_search(search, console)
    write_atomic(report_path, render_markdown(judgement, pool.records, title.capitalize(), search))
    _write_html(folder / "report.html", judgement, pool, title.capitalize(), console, search)
    return report_path, judgement


def _say(as_json: bool, document: Any, text: Callable[[], str]) -> None:
    """One JSON document on stdout (``--json``: nothing else goes there), or the text."""
    if as_json:
        _json_document(document)
    else:
        print(text(), flush=True)


def _json_document(document: Any) -> None:
    """A task's whole answer as one JSON document (docs/schema/<task>.schema.json)."""
    print(json.dumps(document, default=str, indent=2), flush=True)


def _json_line(document: Any) -> None:
    """One line of a JSON-lines answer (a task that says one thing per host)."""
    print(json.dumps(document, default=str, sort_keys=True), flush=True)


def _search_report(pool: Any, console: Console | None) -> Any:
    """A search's or bisection's result from the pool's folders (report/search.py); a model that
    fails costs this section, never the report (said on the terminal)."""
    from reprofleet.report.folders import Folders
    from reprofleet.report.search import search_report

    try:
        return search_report(pool, Folders.of(pool).roots)
    except Exception as exc:  # noqa: BLE001 - the verdicts and records stand without it
        if console is not None:
            console.print(f"[yellow]search result not computed: {type(exc).__name__}: {exc}[/]")
        return None


def _print_search(search: Any, console: Console) -> None:
    if search is not None:
        from reprofleet.report.search import boundary_lines

        for line in boundary_lines(search):
            console.print(f"{search.plan.kind}: {line}")


def _write_html(path: Path, judgement: Any, pool: Any, title: str, console: Console, search: Any = None) -> Path | None:
    """report.html; a figure that fails to draw costs the HTML file, never report.md or the records."""
    from reprofleet.report import render_html

    try:
        write_atomic(path, render_html(judgement, pool, title, search))
    except Exception as exc:  # noqa: BLE001 - a plotting bug must not lose a campaign's summary
        console.print(f"[yellow]report.html not written: {type(exc).__name__}: {exc}[/]")
        return None
    return path


def _notify_observers(c: Any) -> tuple[Any, ...]:
    """invoke.yaml's ``notify:`` as the campaign's notifier (none when it names no receiver);
    a wrong key or a missing secret stops here, before any host is asked."""
    from reprofleet.campaign.notify import Notifier
    from reprofleet.campaign.notify_senders import build_send, parse_settings

    notify = parse_settings(_plain(_conf(c).get("notify")))
    return (Notifier(build_send(notify), kinds=notify.kinds),) if notify.enabled else ()


def run_and_report(c: Any, hosts: str, playbook: str, attempts: int | None, dry_run: bool,
                   resume: str | None, accept_new: bool | None,
                   overrides: dict[str, Any] | None = None, check_hosts: bool = False,
                   limit: str | None = None, as_json: bool = False) -> ExitStatus:
    """Load and validate everything, then run (or describe) the campaign and summarize it.
    ``check_hosts`` (with ``dry_run``): also ask every host whether it can run its plan;
    ``limit``: an Ansible host pattern choosing which of the inventory's hosts run;
    ``as_json``: stdout carries one JSON document at the end, the live view and tables go to stderr."""
    from reprofleet.campaign import run as campaign_mod
    from reprofleet.inventory import load_inventory
    from reprofleet.playbook import load_playbook
    from reprofleet.cli.progress import LiveProgress
    from reprofleet.records.store import CampaignDir
    from reprofleet.campaign.preflight import check_playbook_against_hosts
    from reprofleet.runner.recovery import recovery_factory

    # The playbook first: the env_secrets it names are kept from a dynamic inventory's script.
    from reprofleet.inventory.patterns import limited

    book = load_playbook(playbook, attempts_override=attempts)
    whole = load_inventory(hosts)
    inventory = limited(limited(whole, book.hosts, where=_pattern_where(book)), limit)
    _configure_power(c)  # before the preflight builds every driver: its timings are those of invoke.yaml
    report_root = Path(_conf(c)["reports"])
    done: dict[tuple[str, str], int] = {}
    campaign_id = None
    if resume:
        directory = CampaignDir(Path(resume))
        done = campaign_mod.completed_counts(directory)
        campaign_id = directory.root.name
        report_root = directory.root.parent
    check_playbook_against_hosts(book, inventory.hosts, report_root)
    plan = campaign_mod.make_plan(book, inventory.hosts, campaign_id, done)
    console = _stderr_console() if as_json else _console()
    if dry_run and as_json:
        return _dry_run_json(c, plan, whole, book.hosts, limit, check_hosts, accept_new, overrides)
    if not dry_run:  # the dry run's plan text carries these lines itself
        from reprofleet.campaign.preflight import observe_only_refusals

        for line in observe_only_refusals(book, inventory.hosts):
            _stderr_console().print(f"[yellow]{line}[/]")
    if dry_run:
        if limit or book.hosts:
            chosen_by = " and ".join(f"{what} {pattern!r}" for what, pattern in (("the playbook's hosts:", book.hosts),
                                                                             ("--limit", limit)) if pattern)
            print(f"{chosen_by} chose {len(inventory.hosts)} of the {len(whole.hosts)} hosts of {whole.source}")
        print(campaign_mod.describe_plan(plan))
        if not check_hosts:
            return ExitStatus.OK
        from reprofleet.campaign.facts import readiness_lines

        lines, ok = readiness_lines(plan, _settings(c, accept_new, overrides))
        print("\n".join(lines))
        return ExitStatus.OK if ok else ExitStatus.SOME_HOSTS_FAILED
    from reprofleet.power.base import PowerState
    from reprofleet.campaign.preflight import power_states_at_start

    for name, states in power_states_at_start(inventory.hosts, report_root).items():  # every PDU/BMC answers
        if PowerState.OFF in states:
            console.print(f"[yellow]{name}: its outlet reads off; it is switched on before its first attempt if this "
                          "campaign saw it answer or switched it off (a resume), or with --bring-up[/]")
    settings = _settings(c, accept_new, overrides)
    observers = _notify_observers(c)
    stop = threading.Event()
    _install_stop_handlers(stop)
    ladder = plan.playbook.ladder  # a search's slots are chosen at run time: no per-host plan to count down
    planned: dict[str, int | None] = {h: None if ladder else len(v) for h, v in plan.per_host.items()}
    with LiveProgress(planned.keys(), planned, console, budget=ladder.budget_attempts if ladder else None) as progress:
        result = campaign_mod.run_campaign(plan, settings, report_root, progress=progress, stop=stop,
                                           recovery_factory=recovery_factory, observers=observers)
    report_path, judgement = write_campaign_report(result.directory.root, console, f"campaign {result.campaign_id}")
    html_path = report_path.with_suffix(".html")
    console.print(f"records: {result.directory.attempts}\nreport:  {report_path}"
                  + (f"\nhtml:    {html_path}" if html_path.exists() else ""))
    status = campaign_status(result, _stderr_console())
    if as_json:
        _json_document({"dry_run": False, "exit_status": int(status), "result": result.to_json(),
                        "report": str(report_path), "html": str(html_path) if html_path.exists() else None,
                        "judgement": judgement.to_json() if judgement is not None else None})
    return status


def _dry_run_json(c: Any, plan: Any, whole: Any, book_hosts: str | None, limit: str | None, check_hosts: bool,
                  accept_new: bool | None, overrides: dict[str, Any] | None) -> ExitStatus:
    """``--dry-run --json``: the hosts chosen, the plan, and with ``--check-hosts`` each host's answer."""
    readiness = None
    status = ExitStatus.OK
    if check_hosts:
        from reprofleet.campaign.facts import readiness_lines

        lines, ok = readiness_lines(plan, _settings(c, accept_new, overrides))
        readiness = {"ready": ok, "lines": lines}
        status = ExitStatus.OK if ok else ExitStatus.SOME_HOSTS_FAILED
    chosen = {"inventory": str(whole.source), "of": len(whole.hosts), "chosen": [h.name for h in plan.hosts],
              "playbook_hosts": book_hosts or None, "limit": limit}
    _json_document({"dry_run": True, "exit_status": int(status), "chosen": chosen, "plan": plan.to_json(),
                    "readiness": readiness})
    return status


def campaign_status(result: Any, err: "Console") -> ExitStatus:
    """The exit status of a campaign, with one line on stderr per reason it is not 0."""
    if result.failure:
        err.print(f"[red]campaign stopped: {result.failure}[/]")
        return ExitStatus.ERROR
    if result.interrupted:
        return ExitStatus.INTERRUPTED
    for host, why in sorted(result.quarantined.items()):
        err.print(f"[red]{host}: quarantined: {why}[/]")
    for cell in result.unjudged:
        err.print(f"[yellow]cell {cell}: no attempt could be judged on any host (every record is infra)[/]")
    if result.quarantined:
        return ExitStatus.SOME_HOSTS_FAILED
    return ExitStatus.NOT_JUDGED if result.unjudged else ExitStatus.OK


@task(help={
    "hosts": "Ansible inventory (YAML, INI, or any source ansible-inventory reads)",
    "playbook": "campaign YAML (default playbooks/sm120-hostwedge.yml)",
    "attempts": "attempts per cell per host (overrides the playbook)",
    "dry-run": "print the plan and contact nothing",
    "resume": "continue the campaign in this report folder",
    "accept-new-host-keys": "record unknown host keys instead of refusing them",
    "break-lease": "take hosts whose lease another campaign holds (say so only when that campaign is dead)",
    "bring-up": "power-cycle hosts that do not answer at the start even if this campaign never saw them answer",
    "check-hosts": "with --dry-run: ask every host (changing nothing) whether it can run its plan",
    "limit": "Ansible host pattern: only these hosts run (e.g. 'blackwell:!ws03', 'ws0[1-2]*', '@retry-file')",
    "json": "stdout: one JSON document at the end, the summary and verdicts (with --dry-run: the plan); the live "
            "view goes to stderr (docs/schema/campaign.schema.json)",
})
@handled
def campaign(c: Context, hosts: str = "", playbook: str = "playbooks/sm120-hostwedge.yml", attempts: str | None = None,
             dry_run: bool = False, resume: str | None = None, accept_new_host_keys: bool = False,
             break_lease: bool = False, bring_up: bool = False, check_hosts: bool = False,
             limit: str = "", json_: bool = False) -> ExitStatus:
    """Run a reproduction campaign on every host of an inventory."""
    hosts = _need_inventory(hosts)
    if check_hosts and not dry_run:
        raise BadArgument("--check-hosts goes with --dry-run (a campaign checks its hosts anyway)")
    overrides = {**({"break_leases": True} if break_lease else {}), **({"bring_up": True} if bring_up else {})}
    return run_and_report(c, hosts, playbook, _count("attempts", attempts), dry_run, resume,
                          accept_new_host_keys or None, overrides or None, check_hosts=check_hosts,
                          limit=limit or None, as_json=json_)


@task(help={"hosts": "Ansible inventory",
            "json": "print one JSON line per host instead of a table (docs/schema/facts.schema.json)",
            "accept-new-host-keys": "record unknown host keys instead of refusing them",
            "limit": "Ansible host pattern: only these hosts",
            "bug-report": "instead of the facts: run nvidia-bug-report.sh on each host (as root or sudo -n) and "
                          "fetch its nvidia-bug-report.log.gz",
            "into": "with --bug-report: the folder the archives go to, one folder per host (default: bug-reports)",
            "bug-report-timeout": "with --bug-report: seconds the script may run on a host (default: 600)"})
@handled
def facts(c: Context, hosts: str = "", json_: bool = False, accept_new_host_keys: bool = False,
          limit: str = "", bug_report: bool = False, into: str = "", bug_report_timeout: str = "") -> ExitStatus:
    """Collect and show each host's facts (GPU, driver, OS, BIOS, boot_id), or with --bug-report their
    nvidia-bug-report.sh archives."""
    hosts = _need_inventory(hosts)
    if (into or bug_report_timeout) and not bug_report:
        raise BadArgument("--into and --bug-report-timeout go with --bug-report")
    from reprofleet.inventory import load_inventory

    from reprofleet.inventory.patterns import limited

    inventory_hosts = limited(load_inventory(hosts), limit or None).hosts
    if bug_report:
        return _bug_reports(c, inventory_hosts, json_, accept_new_host_keys, into, bug_report_timeout)
    from reprofleet.campaign.facts import collect_facts
    from reprofleet.cli.tables import facts_table
    from reprofleet.records.facts_cache import cache_facts

    results = collect_facts(inventory_hosts, _settings(c, accept_new_host_keys or None))
    for name, value in results.items():
        if isinstance(value, dict):
            cache_facts(Path(_conf(c)["reports"]), name, value)
    if json_:
        for name, value in results.items():
            print(json.dumps({"host": name, **(value if isinstance(value, dict) else {"error": str(value)})}))
    else:
        _console().print(facts_table(results))
    return ExitStatus.OK if all(isinstance(v, dict) for v in results.values()) else ExitStatus.SOME_HOSTS_FAILED


def _bug_reports(c: Context, hosts: Any, json_: bool, accept_new_host_keys: bool, into: str,
                 timeout: str) -> ExitStatus:
    """``facts --bug-report``: one line per host (the archive, its size and sha256, or why not)."""
    from reprofleet.campaign.bug_report import DEFAULT_TIMEOUT_S, collect_bug_reports
    from reprofleet.remote.transport import connect

    timeout_s = _seconds("bug-report-timeout", timeout) if timeout else DEFAULT_TIMEOUT_S
    transport = _settings(c, accept_new_host_keys or None).transport
    reports = collect_bug_reports(hosts, lambda host: connect(host, transport), Path(into or "bug-reports"), timeout_s)
    for report in reports:
        print(json.dumps(report.to_json()) if json_ else report.line())
    return ExitStatus.OK if all(r.ok for r in reports) else ExitStatus.SOME_HOSTS_FAILED


@task(help={"count": "number of simulated hosts (default: every host of --config, or 3 demo hosts)",
            "config": "fleet YAML (default: the demo fleet)"})
@handled
def sim_up(c: Context, count: str = "", config: str | None = None) -> ExitStatus:
    """Start a simulated fleet (real sshd in network namespaces) and write its inventory."""
    from reprofleet.sim import simctl

    fleet = simctl.up(_count("count", count) or 0, config, Path(_conf(c)["sim_dir"]))
    print(f"fleet up: {len(fleet.hosts)} hosts; inventory: {fleet.inventory_path}")
    return ExitStatus.OK


@task(help={"json": "print one JSON line per simulated host (docs/schema/sim.status.schema.json)"})
@handled
def sim_status(c: Context, json_: bool = False) -> ExitStatus:
    """Show the simulated fleet's hosts: address, power, frozen, boot_id, GPU policy."""
    from reprofleet.sim import simctl

    if json_:
        for row in simctl.status(Path(_conf(c)["sim_dir"])):
            _json_line(row)
    else:
        _console().print(simctl.status_table(Path(_conf(c)["sim_dir"])))
    return ExitStatus.OK


@task
@handled
def sim_down(c: Context) -> ExitStatus:
    """Tear the simulated fleet down (every process, namespace, bridge and cgroup)."""
    from reprofleet.sim import simctl

    simctl.down(Path(_conf(c)["sim_dir"]))
    print("fleet down")
    return ExitStatus.OK


@task(help={"count": "number of simulated hosts (default 3)", "playbook": "demo campaign YAML",
            "attempts": "attempts per host and cell (default: the playbook's)",
            "json": "stdout: one JSON document at the end, as campaign --json (docs/schema/demo.schema.json)"})
@handled
def demo(c: Context, count: str = "3", playbook: str = "playbooks/demo.yml", attempts: str = "",
         json_: bool = False) -> ExitStatus:
    """Simulated fleet up, a campaign over it, the summary, fleet down."""
    from reprofleet.sim import simctl

    sim_dir = Path(_conf(c)["sim_dir"])
    hosts_wanted, attempts_wanted = _count("count", count), _count("attempts", attempts)
    fleet = simctl.up(hosts_wanted or 3, None, sim_dir)
    try:
        return run_and_report(c, str(fleet.inventory_path), playbook, attempts_wanted, False, None, None,
                              DEMO_OVERRIDES, as_json=json_)
    finally:
        simctl.down(sim_dir)


@task(positional=["host", "action"],
      help={"host": "host name from the inventory (or the first word: invoke power HOST ACTION --hosts INVENTORY)",
            "action": "on | off | status | cycle | verify (or the second word); verify proves the wiring: off, "
                      "this host and no other goes silent, on, it boots",
            "hosts": "Ansible inventory", "yes": "do not ask for confirmation", "dwell": "seconds off in a cycle",
            "ignore-lease": "switch even a host a running campaign holds",
            "json": "print the result as one JSON document (docs/schema/power.schema.json)"})
@handled
def power(c: Context, host: str, action: str, hosts: str = "", yes: bool = False, dwell: str | None = None,
          ignore_lease: bool = False, json_: bool = False) -> ExitStatus:
    """Switch one host's power through its PDU/BMC: invoke power HOST ACTION --hosts INVENTORY (asks unless --yes).

    A host a live campaign holds is refused unless --ignore-lease; one whose lease cannot be
    read (it does not answer) is switched with a warning."""
    from reprofleet.campaign.power_ops import PowerOutcome, live_lease, power_action, verify_wiring

    if not hosts:
        raise BadArgument("which inventory? invoke power HOST ACTION --hosts INVENTORY")
    _configure_power(c)
    if action != "status" and not ignore_lease:
        lease, unreadable = live_lease(hosts, host, _settings(c).transport)
        if lease is not None:
            raise HostLeased(host, f"campaign {lease.get('campaign')} of {lease.get('controller')} holds this host "
                                   f"(renewed {float(lease.get('age_s') or 0):.0f} s ago); pass --ignore-lease to "
                                   "switch it anyway")
        if unreadable:
            _stderr_console().print(f"[yellow]{host}: its lease could not be read ({unreadable}); a campaign may "
                                    "hold it[/]")
    if action == "verify":
        if not yes and not _confirm(f"switch {host} off to check its wiring, then on again? [y/N] "):
            print("nothing done", file=sys.stderr if json_ else sys.stdout)
            return ExitStatus.ERROR
        report = verify_wiring(hosts, host, Path(_conf(c)["reports"]))
        _say(json_, report.to_json(), lambda: "\n".join(report.lines()))
        return ExitStatus.OK if report.ok else ExitStatus.SOME_HOSTS_FAILED
    if action not in ("on", "off", "status", "cycle"):
        raise BadArgument(f"action must be on, off, status, cycle or verify, not {action!r}")
    dwell_s = _seconds("dwell", dwell) if dwell is not None else float(_conf(c)["dwell_s"])
    if action != "status" and not yes and not _confirm(f"power {action} {host}? [y/N] "):
        print("nothing done", file=sys.stderr if json_ else sys.stdout)
        return ExitStatus.ERROR
    state = power_action(hosts, host, action, Path(_conf(c)["reports"]), dwell_s)
    _say(json_, PowerOutcome(host, action, state).to_json(), lambda: f"{host}: {state.value}")
    return ExitStatus.OK


@task(help={"hosts": "Ansible inventory", "limit": "Ansible host pattern: only these hosts",
            "playbook": "the campaign the hosts must be ready for (default playbooks/sm120-hostwedge.yml)",
            "json": "print one JSON line per host instead of tables (docs/schema/doctor.schema.json)",
            "accept-new-host-keys": "record unknown host keys instead of refusing them"})
@handled
def doctor(c: Context, hosts: str = "", limit: str = "", playbook: str = "playbooks/sm120-hostwedge.yml",
           json_: bool = False, accept_new_host_keys: bool = False) -> ExitStatus:
    """Before the first night: per host, what the plan needs, whether it is there, and the fix (changes nothing)."""
    hosts = _need_inventory(hosts)
    from reprofleet.campaign import doctor as doc
    from reprofleet.cli.tables import doctor_table
    from reprofleet.inventory import load_inventory
    from reprofleet.inventory.patterns import limited
    from reprofleet.playbook import load_playbook

    book = load_playbook(playbook)
    inventory = limited(limited(load_inventory(hosts), book.hosts, where=_pattern_where(book)), limit or None)
    _configure_power(c)
    cells = list(book.cells)
    evidence = doc.examine(inventory.hosts, lambda host: cells, _settings(c, accept_new_host_keys or None),
                           Path(_conf(c)["reports"]))
    found = [doc.diagnose(h, cells, evidence[h.name], root_features=doc.root_features(cells, h))
             for h in inventory.hosts]
    if json_:
        for diagnosis in found:
            print(json.dumps(diagnosis.to_json(), sort_keys=True))
    else:
        console = _console()
        for diagnosis in found:
            console.print(doctor_table(diagnosis))
        ready = sum(d.ready for d in found)
        console.print(f"{ready} of {len(found)} hosts ready for {book.path}")
    return ExitStatus.OK if all(d.ready for d in found) else ExitStatus.SOME_HOSTS_FAILED


@task(name="policy", help={"hosts": "Ansible inventory", "restore": "put every GPU back to its defaults",
                           "read": "show what each GPU reports (default)",
                           "ignore-lease": "restore even on hosts a campaign holds (it would run on the defaults)",
                           "limit": "Ansible host pattern: only these hosts",
                           "json": "print one JSON line per host instead of the table "
                                   "(docs/schema/policy.schema.json)"})
@handled
def policy_task(c: Context, hosts: str = "", restore: bool = False, read: bool = False,
                ignore_lease: bool = False, limit: str = "", json_: bool = False) -> ExitStatus:
    """Read, or restore to defaults, the GPU policy of every host.

    A host a live campaign holds is refused (named, with its holder) unless --ignore-lease:
    its attempts would otherwise be credited to a cell whose policy is no longer in force."""
    hosts = _need_inventory(hosts)
    from reprofleet.campaign.policy_restore import policy_everywhere, policy_json
    from reprofleet.cli.tables import policy_table

    action = "restore" if restore else "read"
    results = policy_everywhere(hosts, _settings(c), action, ignore_lease=ignore_lease, limit=limit or None)
    if json_:
        for name, result in results.items():
            _json_line(policy_json(name, action, result))
    else:
        _console().print(policy_table(results))
    return ExitStatus.OK if all(isinstance(v, dict) for v in results.values()) else ExitStatus.SOME_HOSTS_FAILED


def _sources(c: Any, paths: list[str] | None) -> list[Path]:
    """Positional PATHs and ``--paths`` (repeatable, or comma-separated as before); default: reports/."""
    return [Path(p) for entry in paths or [] for p in str(entry).split(",") if p] or [Path(_conf(c)["reports"])]


def _report_outputs(c: Any, out: str) -> tuple[Path, Path]:
    """``--out FILE.md`` (report.html beside it) or ``--out FOLDER``; default: reports/pooled/."""
    target = Path(out) if out else Path(_conf(c)["reports"]) / "pooled"
    if target.suffix == ".md":
        return target, target.with_suffix(".html")
    return target / "report.md", target / "report.html"


def _override_caveat(info: Any, counted: tuple[Any, ...]) -> str:
    """A campaign without campaign.json judged with --reproductions: its verdicts say so."""
    if info.source:
        return str(info.caveat)
    return (f"campaign {info.campaign} has no campaign.json: judged with --reproductions "
            f"{','.join(o.value for o in counted)} and no phase at risk")


@task(klass=RestTask, iterable=["paths"],
      help={"paths": "campaign folders or attempts.jsonl files: invoke report PATH [PATH ...] (also --paths A,B; "
                     "default: every campaign under reports/)",
            "reproductions": "override the campaigns' own reproductions (comma-separated outcomes)",
            "reference": "compare every cell with this one (default: the campaigns' reference)",
            "json": "print the verdicts, and each cell's rate per host and pooled (rates), as JSON "
                    "(docs/schema/report.schema.json)",
            "out": "a folder for report.md and report.html, or FILE.md (report.html beside it); default reports/pooled",
            "issue": "also write the text a bug report asks for: vllm (collect-env, reproducer, results) or nvidia "
                     "(system, steps, how often, logs), as issue-vllm.md / issue-nvidia.md beside report.md"})
@handled
def report(c: Context, paths: list[str] | None = None, reproductions: str = "", reference: str = "",
           json_: bool = False, out: str = "", issue: str = "") -> ExitStatus:
    """Pool records from many campaigns and controllers: report.md and report.html, one verdict per cell."""
    from dataclasses import replace

    from reprofleet.model import Outcome
    from reprofleet.records.pooling import load_pool
    from reprofleet.cli.progress import summary_table, verdict_table
    from reprofleet.report import render_markdown
    from reprofleet.verdicts import judge

    from reprofleet.report.issue_text import Tracker

    try:
        tracker = Tracker(issue) if issue else None
    except ValueError:
        raise BadArgument(f"--issue takes {' or '.join(t.value for t in Tracker)}, not {issue!r}") from None
    pool = load_pool(_sources(c, paths))
    if reproductions:
        try:
            counted = tuple(Outcome(o.strip()) for o in reproductions.split(",") if o.strip())
        except ValueError as exc:
            raise BadArgument(f"--reproductions: {exc}") from None
        pool = replace(pool, campaigns={k: replace(v, judging=replace(v.judging, reproductions=counted),
                                                   caveat=_override_caveat(v, counted))
                                        for k, v in pool.campaigns.items()})
    judgement = judge(pool, reference or None)
    if json_:
        from reprofleet.report.rates import rates_json

        search = _search_report(pool, None)
        print(json.dumps({**judgement.to_json(), "rates": rates_json(judgement),
                          **({"search": search.to_json()} if search is not None else {})}, indent=2, default=str))
        return ExitStatus.OK
    console = _console()
    search = _search_report(pool, console)
    console.print(summary_table(judgement, f"{judgement.attempts} attempts pooled"))
    console.print(verdict_table(judgement))
    _print_search(search, console)
    markdown_path, html_path = _report_outputs(c, out)
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(markdown_path, render_markdown(judgement, pool.records, "reprofleet report", search))
    written = _write_html(html_path, judgement, pool, "reprofleet report", console, search)
    console.print(f"report:  {markdown_path}" + (f"\nhtml:    {written}" if written else ""))
    if tracker is not None:
        from reprofleet.report.folders import Folders
        from reprofleet.report.issue_text import issue_markdown

        issue_path = markdown_path.with_name(f"issue-{tracker.value}.md")
        write_atomic(issue_path, issue_markdown(tracker, judgement, pool.records,
                                                Folders.of(pool).facts(pool.records), html_path.name))
        console.print(f"issue:   {issue_path}")
    return ExitStatus.OK


def _plan_search(book: Any, hosts: str | None, truths: list[str], campaigns: str | None,
                 as_json: bool = False) -> ExitStatus:
    """``invoke plan --playbook`` of a search or bisection (campaign/search_estimate.py)."""
    from reprofleet.campaign import search_estimate as searching

    try:
        runs = int(campaigns) if campaigns else searching.DEFAULT_RUNS
    except ValueError:
        raise BadArgument(f"--campaigns takes a whole number of simulated runs, not {campaigns!r}") from None
    try:
        stated = [searching.parse_truth(t, book.ladder) for t in truths] or [searching.default_truth(book.ladder)]
    except ValueError as exc:
        raise BadArgument(str(exc)) from None
    names: list[str] = []
    if hosts:
        from reprofleet.inventory import load_inventory

        names = list(load_inventory(hosts).names)
    if not truths:
        print(f"no --truth given: simulating the default curve ({stated[0].words})",
              file=sys.stderr if as_json else sys.stdout)
    estimate = searching.search_estimate(book, stated, runs, book.seed or 0, names)
    _say(as_json, searching.search_estimate_json(estimate), lambda: searching.describe_search_estimate(estimate))
    return ExitStatus.OK


@task(klass=RestTask, iterable=["paths"],
      help={"paths": "two or more campaign folders or attempts files: invoke compare A B [C ...]",
            "by": "sides: path (each argument, default), campaign, controller, host or group (all arguments pooled, "
                  "then split; group: the --hosts inventory's groups)",
            "hosts": "Ansible inventory whose host groups are the sides (with --by group)",
            "reference": "compare every cell with this one on each side (default: the campaigns' reference)",
            "html": "also write the comparison as an HTML file here",
            "json": "print the comparison as one JSON document (docs/schema/compare.schema.json)"})
@handled
def compare(c: Context, paths: list[str] | None = None, by: str = "path", hosts: str = "", reference: str = "",
            html: str = "", json_: bool = False) -> ExitStatus:
    """Campaigns, controllers or hosts side by side: the same cells, each side's rate and verdict, every claim
    Holm-adjusted across sides x cells; by host or group, whether each cell's effect differs between them."""
    from reprofleet.report.compare import SideBy, build_sides, compare_html, compare_table

    try:
        side_by = SideBy(by)
    except ValueError:
        raise BadArgument(f"--by takes {', '.join(s.value for s in SideBy)}, not {by!r}") from None
    sources = [Path(p) for entry in paths or [] for p in str(entry).split(",") if p]
    if not sources:
        raise BadArgument("what to compare? invoke compare A B [C ...] (campaign folders or attempts files)")
    groups = None
    if hosts:
        from reprofleet.inventory import load_inventory

        groups = load_inventory(hosts).groups
    side_by_side = build_sides(sources, side_by, reference or None, groups)
    if json_:
        _json_document(side_by_side.to_json())
    else:
        _console().print(compare_table(side_by_side))
    if html:
        write_atomic(Path(html), compare_html(side_by_side, "reprofleet comparison"))
        print(f"html:    {html}", file=sys.stderr if json_ else sys.stdout)
    return ExitStatus.OK


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
    from reprofleet.campaign import estimate as planning

    if playbook:  # a search's or bisection's plan is a simulation of its own (campaign/search_estimate.py)
        from reprofleet.playbook import load_playbook

        book = load_playbook(playbook)
        if book.ladder is not None:
            return _plan_search(book, hosts, truth or [], campaigns, json_)
        if truth:
            raise BadArgument(f"--truth is for a playbook with search: or bisect:, and {playbook} has neither")

    def number(flag: str, value: str | None) -> float | None:
        try:
            return None if value is None else float(value)
        except ValueError:
            raise BadArgument(f"--{flag} takes a number, not {value!r}") from None

    rate, level = number("baseline", baseline), number("confidence", confidence)
    assert level is not None
    try:
        if hosts or playbook:
            if not (hosts and playbook):
                raise BadArgument("--hosts and --playbook go together")
            from reprofleet.inventory import load_inventory
            from reprofleet.playbook import load_playbook

            conf = _conf(c)
            runs = number("campaigns", campaigns)
            if runs is not None and (runs != int(runs) or runs < 2):
                raise BadArgument(f"--campaigns takes a whole number of at least 2 campaigns, not {campaigns!r}")
            ratios = tuple(number("ratio", r.strip()) or 0.0 for r in ratio.split(",")) if ratio \
                else planning.DEFAULT_RATIOS
            if not all(0.0 < r < 1.0 for r in ratios):
                raise BadArgument(f"--ratio takes rate ratios (cell / reference) between 0 and 1, not {ratio!r}")
            book, names = load_playbook(playbook), load_inventory(hosts).names
            estimate = planning.campaign_estimate(
                book, names, rate or planning.DEFAULT_BASELINE,
                float(conf["dwell_s"]), number("attempt-s", attempt_s), int(conf["power_cycle_budget"]))
            verdicts = planning.verdict_plan(book, names, rate or planning.DEFAULT_BASELINE,
                                             planning.DEFAULT_CAMPAIGNS if runs is None else int(runs), ratios)
            _say(json_, planning.campaign_plan_json(estimate, verdicts),
                 lambda: planning.describe_campaign(estimate) + "\n" + planning.describe_verdicts(verdicts))
            return ExitStatus.OK
        if rate is None:
            raise BadArgument("give --baseline RATE, or --hosts and --playbook")
        baseline_plan = planning.baseline_plan(
            rate, level, number("fixed-rate", fixed_rate), number("alpha", alpha) or 0.0, number("beta", beta) or 0.0)
        _say(json_, baseline_plan.to_json(), lambda: planning.describe_baseline(baseline_plan))
    except ValueError as exc:
        raise BadArgument(str(exc)) from None
    return ExitStatus.OK


@task(name="pull", positional=["host", "name"],
      help={"host": "the host to harvest, by its inventory name", "name": "the new snapshot's name",
            "hosts": "Ansible inventory",
            "runtime": "harvest the persistent cache campaigns keep for this runtime: a docker image or a python "
                       "path, as records show it in runtime.label (e.g. vllm/vllm-openai:v0.25.1)",
            "path": "or harvest this folder on the host (relative paths start at the login's home)",
            "into": "where snapshot folders live on the controller (default: snapshots); the new one is "
                    "INTO/NAME with INTO/NAME.manifest.json beside it",
            "json": "print the snapshot as one JSON document (docs/schema/cache.pull.schema.json)"})
@handled
def cache_pull(c: Context, host: str, name: str, hosts: str = "", runtime: str = "", path: str = "",
               into: str = "snapshots", json_: bool = False) -> ExitStatus:
    """Harvest a host's cache as a snapshot a playbook can name: poc: {cache: seeded, cache_source: ...}."""
    from reprofleet.campaign.cache_ops import pull_from, remote_cache_folder

    if not hosts:
        raise BadArgument("which inventory? invoke cache.pull HOST NAME --hosts INVENTORY --runtime IMAGE|--path DIR")
    pulled = pull_from(hosts, _settings(c), host, name, remote_cache_folder(runtime or None, path or None), Path(into))
    snap = pulled.snapshot
    _say(json_, pulled.to_json(), lambda: f"{host}:{pulled.remote} -> {snap.root}: {len(snap.files)} files, "
                                          f"{snap.total_bytes} bytes, snapshot {snap.snapshot[:16]} "
                                          f"(manifest {pulled.manifest})")
    return ExitStatus.OK


@task(name="push", positional=["folder"],
      help={"folder": "the snapshot folder (a playbook's cache_source)", "hosts": "Ansible inventory",
            "ignore-lease": "push even to hosts a running campaign holds",
            "json": "print one JSON line per host (docs/schema/cache.push.schema.json)"})
@handled
def cache_push(c: Context, folder: str, hosts: str = "", ignore_lease: bool = False, json_: bool = False) -> ExitStatus:
    """Put a snapshot on every host in parallel; only objects a host lacks travel (not to a
    host a live campaign holds unless --ignore-lease)."""
    from reprofleet.campaign.cache_ops import push_everywhere, pushed_json

    if not hosts:
        raise BadArgument("which inventory? invoke cache.push FOLDER --hosts INVENTORY")
    results = push_everywhere(hosts, _settings(c), folder, ignore_lease=ignore_lease)
    for name, result in results.items():
        if json_:
            _json_line(pushed_json(name, result))
            continue
        print(f"{name}: error: {result}" if isinstance(result, Exception) else
              f"{name}: {'already there' if result.already_there else 'pushed'} {result.sent_objects} objects, "
              f"{result.sent_bytes} bytes in {result.seconds:.2f} s")
    return ExitStatus.OK if all(not isinstance(r, Exception) for r in results.values()) else ExitStatus.SOME_HOSTS_FAILED


def _confirm(question: str) -> bool:
    """A person's yes at a terminal. Without one, nothing is done and the task fails (exit 2):
    a script that forgot --yes must not read "nothing done" as success."""
    if not sys.stdin.isatty():
        raise BadArgument(f"{question.split('?')[0].strip()}? there is no terminal to ask on: pass --yes to do it")
    return input(question).strip().lower() in ("y", "yes")


def _pattern_where(book: Any) -> Any:
    """Where a playbook's ``hosts:`` pattern is (file, line, field), for its one-line error."""
    from reprofleet.errors import Location

    return Location(book.path, book.hosts_line, "hosts") if book.hosts else None


def _need_inventory(hosts: str) -> str:
    """The inventory a task needs, or one line saying how to give it."""
    if not hosts:
        raise BadArgument("which inventory? -i/--inventory INVENTORY (an Ansible inventory file or source)")
    return hosts


def _count(flag: str, value: str | None, low: int = 1) -> int | None:
    """A whole-number flag (``--attempts``): one line, not a traceback, for ``x`` or ``0``."""
    if value is None or value == "":
        return None
    try:
        number = int(str(value).strip())
    except ValueError:
        raise BadArgument(f"--{flag} takes a whole number, not {value!r}") from None
    if number < low:
        raise BadArgument(f"--{flag} takes a number >= {low}, not {number}")
    return number


def _seconds(flag: str, value: str) -> float:
    """A duration flag (``--dwell``): finite and >= 0, or one line."""
    try:
        number = float(str(value).strip())
    except ValueError:
        raise BadArgument(f"--{flag} takes seconds (a number), not {value!r}") from None
    if not (number >= 0 and number < float("inf")):
        raise BadArgument(f"--{flag} takes a finite number of seconds >= 0, not {value!r}")
    return number


sim = Collection("sim")
sim.add_task(cast(Task, sim_up), "up")
sim.add_task(cast(Task, sim_status), "status")
sim.add_task(cast(Task, sim_down), "down")

cache = Collection("cache")
cache.add_task(cast(Task, cache_pull), "pull")
cache.add_task(cast(Task, cache_push), "push")

ns = Collection(campaign, facts, doctor, demo, power, policy_task, report, compare, plan, sim, cache)
ns.configure({"reprofleet": DEFAULTS})


@task(positional=["folder"],
      help={"folder": "a campaign folder, reports/<campaign-id> (running or finished; read only, its lock untouched)",
            "json": "print the state and the verdicts so far as JSON (with --watch: one JSON line per refresh; "
                    "docs/schema/status.schema.json)",
            "watch": "refresh until the campaign is no longer running (Ctrl-C leaves, exit 0)",
            "interval": "seconds between refreshes with --watch (default 5)",
            "count": "at most this many refreshes with --watch (default 720)"})
@handled
def status(c: Context, folder: str, json_: bool = False, watch: bool = False, interval: str = "5",
           count: str = "720") -> ExitStatus:
    """Where a campaign stands: hosts, attempts done of planned, wedges, quarantines, ETA, verdicts so far."""
    import time

    from reprofleet.report.status import read_status, status_lines

    if not Path(folder).is_dir():
        raise BadArgument(f"{folder}: no such campaign folder (invoke status reports/<campaign-id>)")
    try:
        every, times = float(interval), int(count)
    except ValueError:
        raise BadArgument(f"--interval takes seconds and --count a number, not {interval!r} and {count!r}") from None
    if every <= 0 or times < 1:
        raise BadArgument("--interval must be more than 0 and --count at least 1")
    clear = watch and not json_ and sys.stdout.isatty()
    try:
        for turn in range(times if watch else 1):
            current = read_status(Path(folder))
            text = json.dumps(current.to_json(), default=str, indent=None if watch else 2)
            print(("\033[H\033[2J" if clear else "") + (text if json_ else "\n".join(status_lines(current))),
                  flush=True)
            if not current.state.running or turn == times - 1:
                break
            time.sleep(every)
    except KeyboardInterrupt:
        pass  # leaving a watch is not a failure
    return ExitStatus.OK


ns.add_task(cast(Task, status))


@task(klass=RestTask, iterable=["paths"],
      help={"paths": "campaign folders or attempts.jsonl files: invoke export PATH [PATH ...] (default: every "
                     "campaign under reports/)",
            "format": "csv (default), parquet (pip install 'reprofleet[export]') or jsonl",
            "out": "the file to write (default: stdout; parquet needs a file)",
            "json": "with --out: print what was written as one JSON document (docs/schema/export.schema.json)"})
@handled
def export(c: Context, paths: list[str] | None = None, format_: str = "csv", out: str = "",
           json_: bool = False) -> ExitStatus:
    """One row per attempt, amendments folded, with each attempt's role: CSV, Parquet or JSON lines."""
    import io
    import os

    from reprofleet.records.export import ExportFormat, folded, write_csv, write_jsonl, write_parquet
    from reprofleet.records.pooling import load_pool

    try:
        kind = ExportFormat(format_)
    except ValueError:
        raise BadArgument(f"--format takes {', '.join(f.value for f in ExportFormat)}, not {format_!r}") from None
    if json_ and not out:
        raise BadArgument("--json says what export wrote, and stdout would carry the rows: give --out FILE")
    sources = _sources(c, paths)
    rows = folded(load_pool(sources))
    if kind is ExportFormat.PARQUET:
        if not out:
            raise BadArgument("--format parquet writes a file: give --out FILE.parquet")
        temp = Path(out).with_name(f".{Path(out).name}.{os.getpid()}.tmp")
        try:
            write_parquet(rows, temp)
            os.replace(temp, out)
        finally:
            temp.unlink(missing_ok=True)
    else:
        text = io.StringIO()
        (write_csv if kind is ExportFormat.CSV else write_jsonl)(rows, text)
        if out:
            write_atomic(Path(out), text.getvalue())
        else:
            sys.stdout.write(text.getvalue())
    if out:
        print(f"{len(rows)} attempts -> {out}", file=sys.stderr)
    if json_:
        from reprofleet.records.export import Exported

        _json_document(Exported(kind, Path(out), len(rows), tuple(map(str, sources))).to_json())
    return ExitStatus.OK


ns.add_task(cast(Task, export))
standardise(ns)  # one flag table for every task (cli/flags.py), after the last task is added
document_exit_statuses(ns)  # each task's --help ends with its exit statuses (cli/exits.py's table)
