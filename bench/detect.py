"""Detection latency: how long after a host freezes does each tool notice?

On one simulated fleet, in one run, every trial starts three long-running remote commands on
each host at once and then freezes the host (the simulated wedge: every packet dropped,
every process frozen, no RST):

- reprofleet: an attempt under the host agent, followed by the campaign's own follower and
  watchdog (stream silence -> independent probes -> verdict); latency from the last line
  received to the declared wedge (what the record's ``detect_latency_s`` holds) and from the
  freeze itself;
- OpenSSH with ``ServerAliveInterval=1 ServerAliveCountMax=3``: time until ssh exits;
- Ansible's ad-hoc ``shell`` module with default settings: time until it returns, capped.

Then it power-cycles the hosts through the simulator and repeats. Needs root (namespaces).

    .venv/bin/python bench/detect.py --hosts 4 --rounds 5      # 20 wedges
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import rewrite_section  # noqa: E402

from reprofleet.agent import AgentClient, load_bundle  # noqa: E402
from reprofleet.attempt import AttemptFollower  # noqa: E402
from reprofleet.inventory import load_inventory  # noqa: E402
from reprofleet.model import Host, Outcome  # noqa: E402
from reprofleet.records import StreamWriter  # noqa: E402
from reprofleet.sim import Fleet, SimHostSpec  # noqa: E402
from reprofleet.probes import probe_host  # noqa: E402
from reprofleet.transport import TransportSettings, connect  # noqa: E402
from reprofleet.watchdog import FleetLiveness, Watchdog, WatchdogSettings  # noqa: E402

CAP_S = 60.0  # how long a trial waits for a tool that may never notice


@dataclass
class Trial:
    host: str
    frozen_at: float = 0.0
    reprofleet_from_last_line: float | None = None
    reprofleet_from_freeze: float | None = None
    openssh: float | None = None
    ansible: float | None = None
    notes: list[str] = field(default_factory=list)


BENCH_MARK = f"REPROFLEET_BENCH={uuid.uuid4().hex}"


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


def _watch_process(argv: list[str], env: dict[str, str], started: threading.Event,
                   result: dict[str, float | None], key: str, freeze_time: list[float]) -> None:
    # Its own session, so that the whole tree (Ansible forks workers and ssh masters) is
    # killed by PID group when a tool never notices.
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    started.set()
    try:
        proc.wait(timeout=CAP_S + 30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        result[key] = None
        return
    ended = time.monotonic()
    result[key] = (ended - freeze_time[0]) if freeze_time and ended - freeze_time[0] <= CAP_S else None


def _reprofleet(host: Host, transport: TransportSettings, fleet_liveness: FleetLiveness, ready: threading.Event,
                out: dict[str, Any], workdir: Path) -> None:
    session = connect(host, transport)
    agent = AgentClient(session, load_bundle(), host.python)
    agent.push()
    attempt_id = f"detect-{uuid.uuid4()}"
    stream = agent.run(attempt_id, ["sleep", "600"], timeout=600)
    settings = WatchdogSettings()

    def probe() -> bool:
        return probe_host(host.address, host.port, settings.probe_timeout_s)

    # Every host of a round freezes at once, which a campaign would (rightly) read as its own
    # network failing: each host is watched on its own here.
    watchdog = Watchdog(host.name, probe, settings, None)
    writer = StreamWriter(workdir / f"{attempt_id}.jsonl")

    def reconnect() -> AgentClient:
        return AgentClient(connect(host, transport), load_bundle(), host.python)

    follower = AttemptFollower(agent, attempt_id, stream, writer, watchdog, timeout_s=CAP_S, reconnect=reconnect,
                               on_event=lambda event: ready.set())
    end = follower.follow()
    out["end"] = end
    out["declared"] = time.monotonic()
    session.close()


def run_round(fleet: Fleet, hosts: list[Host], transport: TransportSettings, inventory: Path,
              workdir: Path) -> list[Trial]:
    fleet_liveness = FleetLiveness(WatchdogSettings().fleet_window_s)
    marker_name, marker_value = BENCH_MARK.split("=", 1)
    env = dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3",
               **{marker_name: marker_value})
    trials, threads, outputs, freezes = [], [], [], []
    for host in hosts:
        ready, out, freeze = threading.Event(), {}, []
        reprofleet_thread = threading.Thread(target=_reprofleet, args=(host, transport, fleet_liveness, ready, out,
                                                                        workdir), daemon=True)
        ssh_started, ansible_started = threading.Event(), threading.Event()
        ssh_argv = ["ssh", "-i", str(host.key_file), "-o", f"UserKnownHostsFile={fleet.known_hosts_path}",
                    "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
                    "-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=3",
                    f"root@{host.address}", "sleep 600"]
        ansible_argv = [str(Path(sys.executable).with_name("ansible")), host.name, "-i", str(inventory),
                        "-m", "shell", "-a", "sleep 600",
                        f"--ssh-common-args=-o UserKnownHostsFile={fleet.known_hosts_path}"]
        tool_out: dict[str, float | None] = {}
        ssh_thread = threading.Thread(target=_watch_process, args=(ssh_argv, env, ssh_started, tool_out, "openssh",
                                                                   freeze), daemon=True)
        ansible_thread = threading.Thread(target=_watch_process, args=(ansible_argv, env, ansible_started, tool_out,
                                                                       "ansible", freeze), daemon=True)
        for thread in (reprofleet_thread, ssh_thread, ansible_thread):
            thread.start()
        threads.append((host, reprofleet_thread, ssh_thread, ansible_thread, ready, out, tool_out, freeze))
    time.sleep(4.0)  # every tool is connected and its remote command runs
    for host, _, _, _, ready, _, _, freeze in threads:
        ready.wait(10)
        fleet.host(host.name).freeze()
        freeze.append(time.monotonic())
    for host, reprofleet_thread, ssh_thread, ansible_thread, _, out, tool_out, freeze in threads:
        reprofleet_thread.join(CAP_S + 30)
        ssh_thread.join(CAP_S + 40)
        ansible_thread.join(CAP_S + 40)
        trial = Trial(host.name, freeze[0])
        end = out.get("end")
        if end is not None and end.outcome is Outcome.WEDGE:
            trial.reprofleet_from_last_line = end.detect_latency_s
            trial.reprofleet_from_freeze = out["declared"] - freeze[0]
        else:
            trial.notes.append(f"reprofleet: {getattr(end, 'outcome', None)}")
        trial.openssh = tool_out.get("openssh")
        trial.ansible = tool_out.get("ansible")
        trials.append(trial)
    kill_marked_processes()
    for host in hosts:
        fleet.host(host.name).power_cycle(dwell_s=0.2)
    return trials


def _stats(values: list[float | None]) -> str:
    seen = sorted(v for v in values if v is not None)
    missed = len(values) - len(seen)
    if not seen:
        return f"never within {CAP_S:g} s ({missed}/{len(values)})"
    p95 = seen[min(len(seen) - 1, int(round(0.95 * (len(seen) - 1))))]
    text = f"median {statistics.median(seen):.2f} s, p95 {p95:.2f} s, max {seen[-1]:.2f} s"
    return text + (f"; {missed}/{len(values)} not noticed within {CAP_S:g} s" if missed else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--results", default=str(Path(__file__).with_name("RESULTS.md")))
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/detect.py needs root (network namespaces)")
    workdir = Path("/var/lib/reprofleet-bench") / uuid.uuid4().hex[:6]
    workdir.mkdir(parents=True)
    specs = [SimHostSpec(f"det{i}", boot_delay_s=0.5) for i in range(args.hosts)]
    fleet = Fleet.up(specs, base_dir=workdir / "fleet")
    trials: list[Trial] = []
    started = time.time()
    try:
        inventory = Path(fleet.inventory_path)
        hosts = list(load_inventory(inventory).hosts)
        transport = TransportSettings(known_hosts=Path(fleet.known_hosts_path))
        for round_index in range(args.rounds):
            trials += run_round(fleet, hosts, transport, inventory, workdir)
            print(f"round {round_index + 1}/{args.rounds}: {len(trials)} wedges", flush=True)
    finally:
        kill_marked_processes()
        fleet.down()
        shutil.rmtree(workdir, ignore_errors=True)
    body = [
        f"Command: `.venv/bin/python bench/detect.py --hosts {args.hosts} --rounds {args.rounds}` "
        f"({time.strftime('%Y-%m-%d', time.gmtime(started))}, {len(trials)} wedges on {args.hosts} simulated hosts, "
        f"2-core VM, {time.time() - started:.0f} s).",
        "",
        "| tool | detection latency |",
        "| --- | --- |",
        f"| reprofleet (last stream line -> wedge declared; the record's detect_latency_s) | "
        f"{_stats([t.reprofleet_from_last_line for t in trials])} |",
        f"| reprofleet (freeze -> wedge declared) | {_stats([t.reprofleet_from_freeze for t in trials])} |",
        f"| OpenSSH ServerAliveInterval=1 ServerAliveCountMax=3 (freeze -> ssh exits) | "
        f"{_stats([t.openssh for t in trials])} |",
        f"| Ansible ad-hoc shell, defaults (freeze -> ansible returns) | {_stats([t.ansible for t in trials])} |",
        "",
        "reprofleet's watchdog: silence 3 s, then SSH-banner and ICMP probes for a 5 s confirm window. OpenSSH's",
        "ServerAlive also ends a session over any 3 s network blip (it cannot tell slow from frozen);",
        "reprofleet's probes can (see tests/test_fleet_liveness.py: 10% loss + 2.5 s stalls, no false wedge).",
    ]
    notes = [f"{t.host}: {', '.join(t.notes)}" for t in trials if t.notes]
    if notes:
        body += ["", "Notes: " + "; ".join(notes)]
    rewrite_section(Path(args.results), "detect", "Wedge detection latency (bench/detect.py)", "\n".join(body))
    print("\n".join(body))
    return 0


if __name__ == "__main__":
    sys.exit(main())
