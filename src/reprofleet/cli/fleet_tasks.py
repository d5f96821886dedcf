"""The by-hand fleet tasks: ``facts``, ``doctor``, ``power``, ``policy``, ``cache.pull`` and
``cache.push``, and the simulated fleet's ``sim.up``, ``sim.status`` and ``sim.down``.

Each parses its flags, calls the ``campaign/`` operation (or the simulator's control) that
does the work, and prints one table or one JSON line per host; a host that fails is a row,
and the exit status says whether any did.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from invoke import Context, task

from reprofleet.cli.args import confirm, need_inventory, whole_number
from reprofleet.cli.config import controller, reports, sim_dir
from reprofleet.cli.exits import BadArgument, ExitStatus, handled
from reprofleet.cli.output import console, json_line, say, stderr_console
from reprofleet.cli.terminal_text import cell, plain, safe_print
from reprofleet.errors import HostLeased

if TYPE_CHECKING:
    from reprofleet.campaign.doctor import DoctorRequest


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
    hosts = need_inventory(hosts)
    if (into or bug_report_timeout) and not bug_report:
        raise BadArgument("--into and --bug-report-timeout go with --bug-report")
    # lazy: the facts, the bug reports, the run settings, paramiko and scipy: 1.2 s that `invoke --list` never pays
    from reprofleet.campaign import bug_report as bug_reports, facts as fleet

    request = fleet.FactsRequest(hosts, controller(c), reports(c), limit or None, accept_new_host_keys or None)
    if bug_report:  # one line per host: the archive, its size and sha256, or why not
        found = bug_reports.fleet_bug_reports(request, Path(into or "bug-reports"), bug_report_timeout)
        for one in found:
            print(json.dumps(one.to_json()) if json_ else plain(one.line()))
        return ExitStatus.OK if all(r.ok for r in found) else ExitStatus.SOME_HOSTS_FAILED
    results = fleet.fleet_facts(request)
    if json_:
        for name, value in results.items():
            print(json.dumps({"host": name, **(value if isinstance(value, dict) else {"error": str(value)})}))
    else:
        # lazy: cli.tables draws with rich and the verdicts (scipy): 0.9 s, paid only without --json
        from reprofleet.cli.tables import facts_table

        safe_print(console(), facts_table(results))
    return ExitStatus.OK if all(isinstance(v, dict) for v in results.values()) else ExitStatus.SOME_HOSTS_FAILED


@task(help={"hosts": "Ansible inventory", "limit": "Ansible host pattern: only these hosts",
            "playbook": "the campaign the hosts must be ready for (default playbooks/sm120-hostwedge.yml)",
            "json": "print one JSON line per host instead of tables (docs/schema/doctor.schema.json)",
            "accept-new-host-keys": "record unknown host keys instead of refusing them",
            "cycle": "instead: power-cycle each chosen idle host once, watched (asks unless --yes): it proves the "
                     "outlet mapping, the BIOS power-on setting, a new boot and the GPU's health, and measures off -> "
                     "sshd as a suggested timeouts.boot; records in REPORTS/doctor/cycle-<time>/",
            "yes": "with --cycle: do not ask for confirmation"})
@handled
def doctor(c: Context, hosts: str = "", limit: str = "", playbook: str = "playbooks/sm120-hostwedge.yml",
           json_: bool = False, accept_new_host_keys: bool = False, cycle: bool = False, yes: bool = False) -> ExitStatus:
    """Before the first night: per host, what the plan needs, whether it is there, and the fix (changes nothing);
    with --cycle, one supervised power cycle of each chosen idle host."""
    hosts = need_inventory(hosts)
    if yes and not cycle:
        raise BadArgument("--yes goes with --cycle (the checkup switches nothing)")
    # lazy: the doctor's checks, the runner, paramiko and scipy: 0.93 s that `invoke --list` never pays
    from reprofleet.campaign.doctor import DoctorRequest, checkup

    request = DoctorRequest(hosts, playbook, controller(c), reports(c), limit or None, accept_new_host_keys or None)
    if cycle:
        return _doctor_cycle(request, json_, yes)
    found = checkup(request)
    if json_:
        for diagnosis in found.found:
            print(json.dumps(diagnosis.to_json(), sort_keys=True))
    else:
        # lazy: cli.tables draws with rich and the verdicts (scipy): 0.9 s, paid only without --json
        from reprofleet.cli.tables import doctor_table

        terminal = console()
        for diagnosis in found.found:
            terminal.print(doctor_table(diagnosis))
        ready = sum(d.ready for d in found.found)
        terminal.print(f"{ready} of {len(found.found)} hosts ready for {found.playbook}")
    return ExitStatus.OK if all(d.ready for d in found.found) else ExitStatus.SOME_HOSTS_FAILED


def _doctor_cycle(request: "DoctorRequest", as_json: bool, yes: bool) -> ExitStatus:
    """``doctor --cycle``: the hosts named, a person's yes, then one host at a time."""
    # lazy: the cycle's lab, the power drivers and paramiko
    from reprofleet.campaign.cycle_lab import plan_cycle, run_cycle

    plan = plan_cycle(request)
    names = ", ".join(h.name for h in plan.chosen)
    question = (f"power-cycle {names} (one at a time: off, {plan.timings.dwell_s:g} s, on, up to "
                f"{plan.timings.boot_s:g} s for sshd)? [y/N] ")
    if not yes and not confirm(question):  # no terminal: BadArgument (exit 2) inside confirm
        raise BadArgument("doctor --cycle: nothing done (not confirmed)")
    run = run_cycle(plan, request)
    for result in run.results:
        if as_json:
            json_line(result.to_json())
        else:
            print("\n".join(plain(line) for line in result.lines()), flush=True)
    suggested = run.suggested_boot_s
    summary = [f"{sum(r.ok for r in run.results)} of {len(run.results)} hosts proven; records in {run.folder}"]
    if suggested is not None:
        slowest = max(r.off_to_sshd_s or 0.0 for r in run.results)
        summary.append(f"suggested playbook setting: timeouts: {{boot: {suggested}}} (slowest off -> sshd "
                       f"{slowest:.0f} s, twice that, rounded up; {plan.playbook} has {plan.timings.boot_s:g})")
    print("\n".join(summary), file=sys.stderr if as_json else sys.stdout, flush=True)
    return ExitStatus.OK if run.ok else ExitStatus.SOME_HOSTS_FAILED


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
    # lazy: the power drivers, the run settings, paramiko and scipy: 0.89 s that `invoke --list` never pays
    from reprofleet.campaign import power_ops, settings

    if not hosts:
        raise BadArgument("which inventory? invoke power HOST ACTION --hosts INVENTORY")
    config = controller(c)
    config.configure_power()
    if action != "status" and not ignore_lease:
        lease, unreadable = power_ops.live_lease(hosts, host, config.run_settings().transport)
        if lease is not None:
            raise HostLeased(host, f"campaign {lease.get('campaign')} of {lease.get('controller')} holds this host "
                                   f"(renewed {float(lease.get('age_s') or 0):.0f} s ago); pass --ignore-lease to "
                                   "switch it anyway")
        if unreadable:
            safe_print(stderr_console(), cell(f"{host}: its lease could not be read ({unreadable}); a campaign may "
                                              "hold it", "yellow"))
    if action == "verify":
        if not yes and not confirm(f"switch {host} off to check its wiring, then on again? [y/N] "):
            print("nothing done", file=sys.stderr if json_ else sys.stdout)
            return ExitStatus.ERROR
        report = power_ops.verify_wiring(hosts, host, reports(c))
        say(json_, report.to_json(), lambda: "\n".join(report.lines()))
        return ExitStatus.OK if report.ok else ExitStatus.SOME_HOSTS_FAILED
    if action not in ("on", "off", "status", "cycle"):
        raise BadArgument(f"action must be on, off, status, cycle or verify, not {action!r}")
    dwell_s = settings.seconds("dwell", dwell) if dwell is not None else config.dwell_s
    if action != "status" and not yes and not confirm(f"power {action} {host}? [y/N] "):
        print("nothing done", file=sys.stderr if json_ else sys.stdout)
        return ExitStatus.ERROR
    state = power_ops.power_action(hosts, host, action, reports(c), dwell_s)
    say(json_, power_ops.PowerOutcome(host, action, state).to_json(), lambda: f"{host}: {state.value}")
    return ExitStatus.OK


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
    hosts = need_inventory(hosts)
    # lazy: the agent's client over paramiko: 85 ms that `invoke --list` never pays
    from reprofleet.campaign.policy_restore import policy_everywhere, policy_json

    action = "restore" if restore else "read"
    results = policy_everywhere(hosts, controller(c).run_settings(), action, ignore_lease=ignore_lease,
                                limit=limit or None)
    if json_:
        for name, result in results.items():
            json_line(policy_json(name, action, result))
    else:
        # lazy: cli.tables draws with rich and the verdicts (scipy): 0.9 s, paid only without --json
        from reprofleet.cli.tables import policy_table

        safe_print(console(), policy_table(results))
    return ExitStatus.OK if all(isinstance(v, dict) for v in results.values()) else ExitStatus.SOME_HOSTS_FAILED


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
    # lazy: the runner's cache sync, paramiko and scipy: 0.65 s that `invoke --list` never pays
    from reprofleet.campaign import cache_ops

    if not hosts:
        raise BadArgument("which inventory? invoke cache.pull HOST NAME --hosts INVENTORY --runtime IMAGE|--path DIR")
    pulled = cache_ops.pull_from(hosts, controller(c).run_settings(), host, name,
                                 cache_ops.remote_cache_folder(runtime or None, path or None), Path(into))
    snap = pulled.snapshot
    say(json_, pulled.to_json(), lambda: f"{host}:{pulled.remote} -> {snap.root}: {len(snap.files)} files, "
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
    # lazy: the runner's cache sync, paramiko and scipy: 0.65 s that `invoke --list` never pays
    from reprofleet.campaign.cache_ops import push_everywhere, pushed_json

    if not hosts:
        raise BadArgument("which inventory? invoke cache.push FOLDER --hosts INVENTORY")
    results = push_everywhere(hosts, controller(c).run_settings(), folder, ignore_lease=ignore_lease)
    for name, result in results.items():
        if json_:
            json_line(pushed_json(name, result))
            continue
        print(plain(f"{name}: error: {result}") if isinstance(result, Exception) else
              f"{name}: {'already there' if result.already_there else 'pushed'} {result.sent_objects} objects, "
              f"{result.sent_bytes} bytes in {result.seconds:.2f} s")
    return ExitStatus.OK if all(not isinstance(r, Exception) for r in results.values()) else ExitStatus.SOME_HOSTS_FAILED


@task(help={"count": "number of simulated hosts (default: every host of --config, or 3 demo hosts)",
            "config": "fleet YAML (default: the demo fleet)"})
@handled
def sim_up(c: Context, count: str = "", config: str | None = None) -> ExitStatus:
    """Start a simulated fleet (real sshd in network namespaces) and write its inventory."""
    # lazy: the simulator's control and its rich tables: 42 ms that only sim.* and demo use
    from reprofleet.sim import simctl

    fleet = simctl.up(whole_number("count", count) or 0, config, sim_dir(c))
    print(f"fleet up: {len(fleet.hosts)} hosts; inventory: {fleet.inventory_path}")
    return ExitStatus.OK


@task(help={"json": "print one JSON line per simulated host (docs/schema/sim.status.schema.json)"})
@handled
def sim_status(c: Context, json_: bool = False) -> ExitStatus:
    """Show the simulated fleet's hosts: address, power, frozen, boot_id, GPU policy."""
    # lazy: the simulator's control and its rich tables: 42 ms that only sim.* and demo use
    from reprofleet.sim import simctl

    if json_:
        for row in simctl.status(sim_dir(c)):
            json_line(row)
    else:
        console().print(simctl.status_table(sim_dir(c)))
    return ExitStatus.OK


@task
@handled
def sim_down(c: Context) -> ExitStatus:
    """Tear the simulated fleet down (every process, namespace, bridge and cgroup)."""
    # lazy: the simulator's control and its rich tables: 42 ms that only sim.* and demo use
    from reprofleet.sim import simctl

    simctl.down(sim_dir(c))
    print("fleet down")
    return ExitStatus.OK
