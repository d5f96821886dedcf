"""What a real dockerd on every simulated host costs the machine, ours beside the naive set-up.

    python3 bench/sim_docker.py --hosts 5 --runs 4 --results bench/RESULTS.md

Every simulated host runs Debian's dockerd (sim/dockerd.py). Two set-ups are measured on the
same fleet shape, one after the other:

* **ours**: each host's data root filled from the cached image store before its first boot
  (sim/image_store.py), containerd a service of its own with the metadata GC's
  ``pause_threshold`` at 0 (sim/dockerd.py ``containerd_config``);
* **naive**: what the first version did: every host ``docker load``-s the images' archive once
  its daemon answers, and dockerd starts its own containerd with containerd's defaults.

For each: the machine's CPU-seconds (every process, from /proc/stat) for bringing the fleet up
until every daemon answers with the images in it, for 30 s of idle, for one power cycle of
every host until every daemon answers again, and per ``docker run`` of the PoC stand-in
(tests/fleet/test_sim_poc.py); wall seconds beside each. The fleet tests' phase runs about 25
hosts at once on 2 cores for 8 minutes, so idle CPU per host is what adds up there.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results import rewrite_section  # noqa: E402
from reprofleet.sim import Fleet, SimHostSpec, dockerd, image_store, images  # noqa: E402
from reprofleet.sim.fleet import IMAGE_CACHE  # noqa: E402
from tests.fleet.test_sim_poc import DOCKER, push_poc  # noqa: E402

RESULTS_JSON = ROOT / "bench" / "sim-docker-results.json"
IDLE_S = 30.0
TITLE = "A real dockerd on every simulated host: ours beside the naive set-up (bench/sim_docker.py)"
TAGS = sorted(images.DEFAULT_VLLM_TAGS)


def machine_cpu_s() -> float:
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


@contextmanager
def measured(into: dict[str, float], key: str) -> Iterator[None]:
    cpu, wall = machine_cpu_s(), time.monotonic()
    yield
    into[f"{key}_cpu_s"] = round(machine_cpu_s() - cpu, 2)
    into[f"{key}_wall_s"] = round(time.monotonic() - wall, 2)


def daemons_ready(fleet: Fleet) -> None:
    """Every host's daemon answers and lists the images (bounded by dockerd.wait_ready's own timeout)."""
    for host in fleet.hosts:
        dockerd.wait_ready(host.record.netns)


@contextmanager
def naive_setup() -> Iterator[Callable[[Fleet], None]]:
    """The first version's set-up: no image store (load per host) and dockerd's own containerd."""
    fill, lines = image_store.fill, dockerd.boot_lines

    def managed_containerd(*args: Any, **kwargs: Any) -> list[str]:
        kept = [line for line in lines(*args, **kwargs) if "setsid -f containerd" not in line]
        return [line.replace(f" --containerd={dockerd.containerd_socket(args[1])}", "") for line in kept]

    image_store.fill = lambda store, data_root: None  # type: ignore[assignment]
    dockerd.boot_lines = managed_containerd  # type: ignore[assignment]
    archive, _ = images.archive_path(IMAGE_CACHE, TAGS)

    def load_everywhere(fleet: Fleet) -> None:
        for host in fleet.hosts:
            dockerd.wait_ready(host.record.netns)
            images.load(dockerd.client_argv(host.record.netns), archive)
    try:
        yield load_everywhere
    finally:
        image_store.fill, dockerd.boot_lines = fill, lines  # type: ignore[assignment]


def measure(setup: str, hosts: int, runs: int) -> dict[str, Any]:
    result: dict[str, Any] = {"setup": setup, "hosts": hosts, "runs_per_host": runs}
    specs = [SimHostSpec(f"bd{i}", script=("clean",) * (runs + 1), time_scale=0.01, boot_delay_s=0.3)
             for i in range(hosts)]
    with (naive_setup() if setup == "naive" else _ours()) as install:
        with measured(result, "up"):
            fleet = Fleet.up(specs)
            daemons_ready(fleet)
            install(fleet)
        try:
            for host in fleet.hosts:
                listed = subprocess.run([*dockerd.client_argv(host.record.netns), "images", "-q"], capture_output=True,
                                        text=True, timeout=30, check=True).stdout.split()
                assert len(set(listed)) >= len(TAGS), listed
                push_poc(host)
            time.sleep(5)  # the start-up's tail (the daemons' first collections) out of the idle window
            with measured(result, "idle"):
                time.sleep(IDLE_S)
            with measured(result, "cycle"):
                for host in fleet.hosts:
                    host.power_cycle()
                fleet.wait_ready()
                daemons_ready(fleet)
            with measured(result, "runs"):
                for _ in range(runs):
                    for host in fleet.hosts:
                        done = host.ssh(DOCKER + " >/dev/null 2>&1; echo rc=$?")
                        assert "rc=0" in done.stdout, done.stdout + done.stderr
        finally:
            fleet.down(remove_files=True)
    result["idle_cpu_s_per_host_minute"] = round(result["idle_cpu_s"] / hosts * 60 / IDLE_S, 3)
    result["up_cpu_s_per_host"] = round(result["up_cpu_s"] / hosts, 3)
    result["cycle_cpu_s_per_host"] = round(result["cycle_cpu_s"] / hosts, 3)
    result["run_cpu_s"] = round(result["runs_cpu_s"] / (hosts * runs), 3)
    return result


@contextmanager
def _ours() -> Iterator[Callable[[Fleet], None]]:
    yield lambda fleet: None


def commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=False).stdout.strip()


def markdown(result: dict[str, Any]) -> str:
    rows = result["rows"]
    lines = [
        f"Command: `{result['command']}` at `{result['commit']}`, {result['date']}, 2-core VM; "
        f"{result['hosts']} simulated hosts, each with Debian's dockerd 20.10 and containerd 1.6; "
        f"{result['runs']} `docker run`s of the PoC stand-in a host.",
        "",
        "| set-up | up: CPU-s a host | up: wall s | idle: CPU-s a host a minute | power cycle: CPU-s a host "
        "| cycle: wall s | CPU-s a `docker run` |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(f"| {row['setup']} | {row['up_cpu_s_per_host']} | {row['up_wall_s']} | "
                     f"{row['idle_cpu_s_per_host_minute']} | {row['cycle_cpu_s_per_host']} | {row['cycle_wall_s']} | "
                     f"{row['run_cpu_s']} |")
    ours, naive = (next(r for r in rows if r["setup"] == name) for name in ("ours", "naive"))
    lines += ["", f"Idle, ours took {ours['idle_cpu_s_per_host_minute'] / max(naive['idle_cpu_s_per_host_minute'], 1e-9):.0%} "
              f"of the naive set-up's CPU a host; bringing a host up, "
              f"{ours['up_cpu_s_per_host'] / max(naive['up_cpu_s_per_host'], 1e-9):.0%}. "
              "These are the whole machine's CPU-seconds, the simulator's own per-fleet daemons (hardware, "
              "about 0.5 CPU-s a host a minute) included: the idle difference is containerd's GC scheduler "
              "(measured alone, per process: 1.9 CPU-s in 30 s for 5 hosts at its defaults, 0.04 with ours). "
              "A `docker run` and a power cycle cost the same in both (the same daemons). What it does not show: "
              "the fleet tests' phase as a whole (docs/ARCHITECTURE.md has it)."]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=5)
    parser.add_argument("--runs", type=int, default=4, help="docker runs per host")
    parser.add_argument("--results", help="the RESULTS.md to rewrite the section of")
    parser.add_argument("--report", action="store_true", help="only write the section from the last results file")
    args = parser.parse_args()
    if args.report:
        text = markdown(json.loads(RESULTS_JSON.read_text()))
        if args.results:
            rewrite_section(Path(args.results), "sim-docker", TITLE, text)
        print(text)
        return 0
    image_store.ensure_store(IMAGE_CACHE, TAGS)  # a cold cache's build is not what is measured
    if not images.archive_path(IMAGE_CACHE, TAGS)[0].exists():  # the naive set-up loads the archive
        with tempfile.TemporaryDirectory(prefix="rf-bench-builder-") as work:
            with image_store.builder_daemon(Path(work)) as docker:
                images.ensure_archive(docker, IMAGE_CACHE, TAGS)
    rows = [measure(setup, args.hosts, args.runs) for setup in ("ours", "naive")]
    result = {"rows": rows, "hosts": args.hosts, "runs": args.runs, "commit": commit(),
              "date": time.strftime("%Y-%m-%d"),
              "command": f".venv/bin/python bench/sim_docker.py --hosts {args.hosts} --runs {args.runs}"}
    RESULTS_JSON.write_text(json.dumps(result, indent=1) + "\n")
    text = markdown(result)
    if args.results:
        rewrite_section(Path(args.results), "sim-docker", TITLE, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
