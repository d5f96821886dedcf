"""Wedge detection on the campaign path: how fast a frozen host is declared, and whether a
slow host is ever misjudged; reprofleet beside OpenSSH ServerAlive and Ansible.

Every scenario runs real campaigns (``run_campaign``, power cycles through a simulated
HTTP plug, the partition guard of the campaign active) on simulated hosts whose attempts
run until their timeout (``hang``). Beside each host's attempt, two watchers hold a long
remote command on the same host, at the threshold matching reprofleet's 3 s of silence:

- OpenSSH: ``ssh -o ServerAliveInterval=1 -o ServerAliveCountMax=3 host sleep 600``;
- Ansible: ad-hoc ``shell: sleep 600`` with the same ServerAlive options in ``ssh_args``.

Scenarios (each one locked fleet run of a few minutes; results merge in a JSON file):

- ``freeze-together``: every host freezes at once (a round per ``--rounds``);
- ``freeze-staggered``: the hosts freeze one at a time, 5 s apart;
- ``loss``: 10 % packet loss each way on every host for the whole attempt;
- ``sigstop``: sshd and the agent SIGSTOPped for 3, 6 and 10 s on every host (staggered);
- ``loss-sigstop``: both at once (the probes of a stalled host run over a lossy link);
- ``cpu``: every host's cgroup capped at 5 % of a CPU for 30 s, two busy loops of the
  host's own competing for that share.

A freeze's latency is from the hardware's freeze to the record's ``wedge_declared`` (or to
the watcher exiting). In the slow-host scenarios, any wedge record, power action, or
watcher that gave up is a false positive.

    flock /tmp/reprofleet-fleet.lock .venv/bin/python bench/detect.py --scenario freeze-together --rounds 3
    .venv/bin/python bench/detect.py --report        # the table in RESULTS.md from the JSON
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import rewrite_section  # noqa: E402

from reprofleet.campaign.run import make_plan, run_campaign  # noqa: E402
from reprofleet.runner.host import RunSettings  # noqa: E402
from reprofleet.inventory import load_inventory  # noqa: E402
from reprofleet.playbook import load_playbook  # noqa: E402
from reprofleet.runner.recovery import recovery_factory  # noqa: E402
from reprofleet.sim import Fleet, SimHostSpec  # noqa: E402
from reprofleet.sim.power import HttpPlugServer  # noqa: E402
from reprofleet.remote.transport import TransportSettings  # noqa: E402
from reprofleet.liveness.watchdog import WatchdogSettings  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
POC = REPO / "playbooks" / "poc" / "sm120_hostwedge.py"
RESULTS_JSON = Path(__file__).with_name("detect-results.json")
CAP_S = 60.0
SERVER_ALIVE = "-o ServerAliveInterval=1 -o ServerAliveCountMax=3"
BENCH_MARK = f"REPROFLEET_BENCH={uuid.uuid4().hex}"
FREEZES = ("freeze-together", "freeze-staggered")
SLOW = ("loss", "sigstop", "loss-sigstop", "cpu")


def kill_marked_processes() -> None:
    """SIGKILL every process that inherited this bench's marker (Ansible's setsid'd workers and
    ssh masters leave the process group); found by PID through /proc, never by name."""
    needle = BENCH_MARK.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue


class Watcher(threading.Thread):
    """One tool holding ``sleep 600`` on a host; notes when (wall time) it gave up."""

    def __init__(self, tool: str, argv: list[str], env: dict[str, str]) -> None:
        super().__init__(daemon=True, name=f"watch-{tool}")
        self.tool = tool
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                     start_new_session=True)
        self.ended: float | None = None

    def run(self) -> None:
        try:
            self.proc.wait(timeout=600)
            self.ended = time.time()
        except subprocess.TimeoutExpired:
            pass

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def watchers_for(fleet: Fleet, inventory: Path, name: str) -> list[Watcher]:
    host = fleet.host(name)
    marker, value = BENCH_MARK.split("=", 1)
    env = dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3",
               ANSIBLE_SSH_ARGS=f"-o ControlMaster=no {SERVER_ALIVE}", **{marker: value})
    ssh = ["ssh", "-i", str(fleet.key_path), "-o", f"UserKnownHostsFile={fleet.known_hosts_path}",
           "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", *SERVER_ALIVE.split(),
           f"root@{host.address}", "sleep 600"]
    ansible = [str(Path(sys.executable).with_name("ansible")), name, "-i", str(inventory), "-m", "shell",
               "-a", "sleep 600", f"--ssh-common-args=-o UserKnownHostsFile={fleet.known_hosts_path}"]
    watchers = [Watcher("openssh", ssh, env), Watcher("ansible", ansible, env)]
    for watcher in watchers:
        watcher.start()
    return watchers


def write_playbook(folder: Path, attempt_timeout: float) -> Path:
    (folder / "poc").mkdir(parents=True, exist_ok=True)
    shutil.copy(POC, folder / "poc" / POC.name)
    path = folder / "book.yml"
    path.write_text(
        "name: detect-bench\n"
        f"poc: {{script: poc/{POC.name}}}\n"
        "runtime: {kind: docker, image: 'vllm/vllm-openai:v{vllm}', docker_args: [--ipc, host]}\n"
        "attempts: 1\n"
        f"timeouts: {{attempt: {attempt_timeout}, boot: 60}}\n"
        "defaults:\n  vars: {vllm: '0.25.1'}\n  args: {spec_tokens: 9, gpu_memory_utilization: 0.87}\n"
        "matrix:\n  - name: default\n"
    )
    return path


def run_round(fleet: Fleet, inventory: Path, workdir: Path, attempt_timeout: float,
              fault: Callable[[list[str]], None], wait_watchers: bool = False) -> dict[str, Any]:
    """One campaign (one attempt per host) with watchers beside it and ``fault`` injected."""
    names = [h.name for h in fleet.hosts]
    running: set[str] = set()
    all_running = threading.Event()

    def progress(host: str, **fields: Any) -> None:
        if fields.get("phase"):
            running.add(host)
            if running >= set(names):
                all_running.set()

    book = write_playbook(workdir / "book", attempt_timeout)
    plan = make_plan(load_playbook(book), load_inventory(inventory).hosts)
    settings = RunSettings(transport=TransportSettings(known_hosts=Path(fleet.known_hosts_path)),
                           watchdog=WatchdogSettings(), controller="bench", sample_hz=5.0, dwell_s=1.0,
                           stability_s=1.0, reboot_grace_s=1.0)
    out: dict[str, Any] = {}
    campaign = threading.Thread(target=lambda: out.update(result=run_campaign(
        plan, settings, workdir / "reports", progress=progress, recovery_factory=recovery_factory)), daemon=True)
    campaign.start()
    all_running.wait(60)
    watchers = {name: watchers_for(fleet, inventory, name) for name in names}
    time.sleep(4.0)  # every watcher is connected and its remote command runs
    fault_started = time.time()
    fault(names)
    campaign.join(attempt_timeout + 120)
    fault_ended = time.time()
    if wait_watchers:  # a frozen host's watchers get up to CAP_S from the fault to give up
        for group in watchers.values():
            for watcher in group:
                watcher.join(max(0.0, fault_started + CAP_S - time.time()))
    for group in watchers.values():
        for watcher in group:
            watcher.stop()
    kill_marked_processes()
    result = out["result"]
    events = [json.loads(x) for x in result.directory.events.read_text().splitlines()]
    power = [json.loads(x) for x in result.directory.power.read_text().splitlines()] \
        if result.directory.power.exists() else []
    return {
        "fault_started": fault_started, "fault_ended": fault_ended,
        "records": [dict(r) for r in result.records],
        "suspects": sum(1 for e in events if e["event"] == "suspect"),
        "clears": sum(1 for e in events if e["event"] == "clear"),
        "power_actions": [p for p in power if p["action"] in ("on", "off", "cycle")],
        "watchers": {n: {w.tool: w.ended for w in group} for n, group in watchers.items()},
        "hardware": [e for e in fleet.events() if e.get("event") in ("wedge", "stall", "resume")],
    }


def _iso(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def freeze_fault(fleet: Fleet, staggered: bool) -> Callable[[list[str]], None]:
    def fault(names: list[str]) -> None:
        for name in names:
            fleet.host(name).freeze(wait=False)
            if staggered:
                time.sleep(5.0)
    return fault


def freeze_trials(fleet: Fleet, round_: dict[str, Any]) -> list[dict[str, Any]]:
    """Per frozen host: latency of each tool from the hardware's freeze."""
    frozen = {e["host"]: e["t"] for e in round_["hardware"] if e["event"] == "wedge" and e["t"] >= round_["fault_started"] - 1}
    trials = []
    for name, at in frozen.items():
        record = next((r for r in round_["records"] if r["host"] == name), None)
        declared = _iso(record["wedge_declared"]) if record and record.get("wedge_declared") else None
        tools = round_["watchers"].get(name, {})
        trials.append({
            "host": name, "outcome": record["outcome"] if record else None,
            "reprofleet": declared - at if declared else None,
            **{tool: (ended - at if ended and ended - at <= CAP_S else None) for tool, ended in tools.items()},
        })
    return trials


def slow_fault(fleet: Fleet, kind: str, notes: dict[str, Any]) -> tuple[float, Callable[[list[str]], None]]:
    def loss(names: list[str]) -> None:
        for name in names:
            fleet.host(name).set_packet_loss(10, both_ways=True)

    def sigstop(names: list[str]) -> None:
        def one(name: str, offset: float) -> None:
            time.sleep(offset)
            for seconds in (3.0, 6.0, 10.0):
                fleet.host(name).stall(seconds, wait=False)
                time.sleep(seconds + 3.0)
        threads = [threading.Thread(target=one, args=(n, 1.5 * i), daemon=True) for i, n in enumerate(names)]
        for thread in threads:
            thread.start()

    def cpu(names: list[str]) -> None:
        def starve() -> None:
            for name in names:
                fleet.host(name).starve_cpu(5)
            time.sleep(30.0)
            notes["throttled_periods"] = {name: fleet.host(name).cpu.throttled() for name in names}
            for name in names:
                fleet.host(name).starve_cpu(None)
        threading.Thread(target=starve, daemon=True).start()

    def both(names: list[str]) -> None:
        loss(names)
        sigstop(names)

    return {"loss": (40.0, loss), "sigstop": (40.0, sigstop), "loss-sigstop": (40.0, both),
            "cpu": (42.0, cpu)}[kind]


def slow_summary(round_: dict[str, Any], attempt_timeout: float) -> dict[str, Any]:
    """False positives: wedges, power actions, watchers that gave up before the attempt's end."""
    deadline = round_["fault_started"] + attempt_timeout - 6.0  # watchers die with the campaign's end
    gave_up = {tool: 0 for tool in ("openssh", "ansible")}
    for tools in round_["watchers"].values():
        for tool, ended in tools.items():
            if ended is not None and ended < deadline:
                gave_up[tool] += 1
    return {
        "hosts": len(round_["watchers"]),
        "wedges": sum(1 for r in round_["records"] if r["outcome"] == "wedge"),
        "outcomes": sorted(r["outcome"] for r in round_["records"]),
        "power_actions": len(round_["power_actions"]),
        "suspects": round_["suspects"], "clears": round_["clears"],
        "openssh": gave_up["openssh"], "ansible": gave_up["ansible"],
    }


def with_witness(inventory: Path, address: str) -> None:
    """Every host of the inventory gets ``witness: ADDRESS`` (a host var)."""
    import yaml

    data = yaml.safe_load(inventory.read_text())
    for group in data["all"]["children"].values():
        for entry in (group.get("hosts") or {}).values():
            entry["witness"] = address
    inventory.write_text(yaml.safe_dump(data, sort_keys=False))


def run_scenario(scenario: str, hosts: int, rounds: int) -> dict[str, Any]:
    workdir = Path("/var/lib/reprofleet-bench") / uuid.uuid4().hex[:6]
    workdir.mkdir(parents=True)
    specs = [SimHostSpec(f"det{i}", script=("hang",) * 50, time_scale=0.05, boot_delay_s=0.5) for i in range(hosts)]
    # a machine on the hosts' side that is not under test: their hosts-side witness, so hosts
    # that freeze together are released from the correlated-silence hold at once (README)
    fleet = Fleet.up([*specs, SimHostSpec("det-witness", script=("clean",))], base_dir=workdir / "fleet")
    tested, witness = fleet.hosts[:-1], fleet.hosts[-1]
    fleet.hosts = tuple(tested)  # what the scenarios fault and judge
    plug = HttpPlugServer(workdir / "plug", "tasmota", {str(i + 1): h.paths.power for i, h in enumerate(tested)})
    plug.start()
    started = time.time()
    try:
        inventory = fleet.write_inventory(workdir / "inventory.yml", hosts=[h.name for h in tested],
                                          pdu={h.name: plug.pdu_block(str(i + 1)) for i, h in enumerate(tested)})
        with_witness(inventory, witness.address)
        if scenario in FREEZES:
            trials: list[dict[str, Any]] = []
            for index in range(rounds):
                round_ = run_round(fleet, inventory, workdir / f"r{index}", 60.0,
                                   freeze_fault(fleet, scenario == "freeze-staggered"), wait_watchers=True)
                trials += freeze_trials(fleet, round_)
                print(f"{scenario} round {index + 1}/{rounds}: {len(trials)} freezes", flush=True)
            outcome: dict[str, Any] = {"trials": trials}
        else:
            notes: dict[str, Any] = {}
            timeout, fault = slow_fault(fleet, scenario, notes)
            round_ = run_round(fleet, inventory, workdir / "r0", timeout, fault)
            outcome = {"summary": {**slow_summary(round_, timeout), **notes}}
            print(f"{scenario}: {outcome['summary']}", flush=True)
    finally:
        kill_marked_processes()
        for host in fleet.hosts:
            host.set_packet_loss(0)
            host.starve_cpu(None)
        plug.stop()
        fleet.hosts = (*tested, witness)
        fleet.down()
        shutil.rmtree(workdir, ignore_errors=True)
    return {"scenario": scenario, "hosts": hosts, "rounds": rounds, "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "seconds": round(time.time() - started), "commit": _commit(), **outcome}


def _commit() -> str:
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def _stats(values: list[float | None]) -> str:
    seen = sorted(v for v in values if v is not None)
    missed = len(values) - len(seen)
    if not seen:
        return f"never within {CAP_S:g} s ({missed}/{len(values)})"
    p95 = seen[min(len(seen) - 1, int(round(0.95 * (len(seen) - 1))))]
    text = f"median {statistics.median(seen):.2f} s, p95 {p95:.2f} s, max {seen[-1]:.2f} s"
    return text + (f"; {missed}/{len(values)} missed" if missed else "")


TOOLS = (("reprofleet", "reprofleet (campaign path, guard active)"),
         ("openssh", "OpenSSH ServerAliveInterval=1 CountMax=3"),
         ("ansible", "Ansible shell, ServerAlive 1/3 in ssh_args"))


def report(runs: dict[str, Any]) -> str:
    freezes = [t for s in FREEZES for t in runs.get(s, {}).get("trials", [])]
    slow = {s: runs[s]["summary"] for s in SLOW if s in runs}
    header = "| tool | freeze -> declared (" + f"{len(freezes)} freezes) | " + \
        " | ".join(f"slow host: {s}" for s in slow) + " |"
    lines = [header, "|" + " --- |" * (2 + len(slow))]
    for key, label in TOOLS:
        cells = [_stats([t.get(key) for t in freezes])]
        for summary in slow.values():
            if key == "reprofleet":
                throttled = summary.get("throttled_periods")
                cells.append(f"{summary['wedges']} wedges, {summary['power_actions']} power actions "
                             f"({summary['suspects']} suspects, {summary['clears']} cleared"
                             + (f"; quota hit in {min(throttled.values())}+ periods per host" if throttled else "")
                             + ")")
            else:
                cells.append(f"{summary[key]} of {summary['hosts']} sessions killed")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for scenario in FREEZES:
        trials = runs.get(scenario, {}).get("trials", [])
        if trials:
            lines.append("")
            lines.append(f"- {scenario} ({len(trials)} freezes): reprofleet "
                         f"{_stats([t.get('reprofleet') for t in trials])}; outcomes "
                         f"{sorted({str(t.get('outcome')) for t in trials})}")
    commands = [f"`flock /tmp/reprofleet-fleet.lock .venv/bin/python bench/detect.py --scenario {s} "
                f"--hosts {r['hosts']}" + (f" --rounds {r['rounds']}" if s in FREEZES else "") + "` "
                f"(commit {r['commit']}, {r['date']}, {r['seconds']} s)" for s, r in runs.items()]
    return "\n".join([
        "Commands (one locked fleet run each; results merged in bench/detect-results.json, the table written by "
        "`.venv/bin/python bench/detect.py --report`), 2-core VM:", "",
        *[f"- {c}" for c in commands], "",
        *lines, "",
        "reprofleet: probing after 1 s of stream silence, rounds every 0.5 s (ICMP echo + TCP/SSH banner, 1 s "
        "timeout, never waiting for earlier rounds); a frozen wedge needs 3 s of silence and the last 3 rounds "
        "DEAD; a kernel that answers without sshd is a suspect for up to 60 s (userspace window). Slow-host "
        "scenarios: 10 % loss each way for 40 s; sshd + agent SIGSTOPped 3, 6 and 10 s (each host, staggered); "
        "both at once; the host's cgroup at a 5 % CPU quota for 30 s with two busy loops of its own. "
        "A watcher 'killed' gave up while the host was only slow; 'suspects' are hosts the watchdog probed, "
        "'cleared' those whose stream came back. Loss alone and the CPU quota never silenced the stream for "
        "1 s (no suspect: the heartbeat kept flowing); the stalls did, and every suspect was cleared. An "
        "Ansible 'missed' is a run that had not returned 60 s after the freeze (in freeze-staggered, always "
        "the first host, frozen 4 s after the watchers started: Ansible was likely still connecting). The "
        "scenarios ran on different commits of a shared tree; the liveness code (probes, watchdog, witness, "
        "attempt) is the same in all of them (unchanged since 1d9aece).",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=(*FREEZES, *SLOW))
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--report", action="store_true", help="write the table to RESULTS.md from the JSON")
    parser.add_argument("--results", default=str(Path(__file__).with_name("RESULTS.md")))
    args = parser.parse_args()
    runs = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.exists() else {}
    if args.scenario:
        if os.geteuid() != 0:
            sys.exit("bench/detect.py needs root (network namespaces)")
        runs[args.scenario] = run_scenario(args.scenario, args.hosts, args.rounds)
        RESULTS_JSON.write_text(json.dumps(runs, indent=1) + "\n")
    if args.report:
        body = report(runs)
        rewrite_section(Path(args.results), "detect", "Wedge detection and false positives (bench/detect.py)", body)
        print(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
