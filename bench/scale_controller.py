"""The scale benchmark's controller: one campaign, in a process of its own.

    python3 bench/scale_controller.py --inventory INV --playbook BOOK --reports DIR --out OUT.json

bench/scale.py starts this as a child so that what it measures (CPU-seconds from the
child's rusage, VmHWM, thread count from /proc/<pid>/status) is the controller's alone,
never the simulator's or the bench's. It runs the same path as ``reprofleet campaign``
(make_plan, run_campaign with recovery) with the CLI's liveness defaults and the demo's
short power-cycle waits, but without the live terminal table (a bench has no terminal),
and writes its own rusage when the campaign starts and ends, so interpreter start-up and
imports can be told from the campaign's own cost.

``--run-shard FOLDER/shard-I`` runs one controller shard instead (bench/shards.py): the slice
and campaign id its folder's shards.json names, into its sub-folder, as the job that
``invoke campaign --shards`` submits runs it (campaign/shards.py ``shard_request``).

``--profile FILE`` runs every thread under its own cProfile with a per-thread CPU clock
(``time.thread_time``) and writes the merged stats: where the controller's CPU goes.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from reprofleet.campaign.run import make_plan, run_campaign  # noqa: E402
from reprofleet.inventory import load_inventory  # noqa: E402
from reprofleet.playbook import load_playbook  # noqa: E402
from reprofleet.runner.recovery import recovery_factory  # noqa: E402
from reprofleet.runner.host import RunSettings  # noqa: E402
from reprofleet.remote.transport import TransportSettings  # noqa: E402
from reprofleet.liveness.watchdog import WatchdogSettings  # noqa: E402

DEMO_WAITS = {"dwell_s": 2.0, "stability_s": 1.0, "reboot_grace_s": 2.0}  # tasks.DEMO_OVERRIDES


def cpu_now() -> dict[str, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"user_s": usage.ru_utime, "sys_s": usage.ru_stime, "wall": time.time()}


class ThreadProfiles:
    """One cProfile per thread (a Profile is not thread-safe), timed by thread CPU time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._profiles: list[cProfile.Profile] = []
        self._original: Callable[..., None] = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def install(self) -> None:
        """Wrap every thread's bootstrap, so subclasses with their own ``run`` (paramiko's
        Transport, the liveness monitor) are profiled too."""
        profiles, original, lock = self._profiles, self._original, self._lock

        def bootstrap(thread: threading.Thread) -> None:
            profile = cProfile.Profile(time.thread_time)
            with lock:
                profiles.append(profile)
            profile.runcall(original, thread)

        threading.Thread._bootstrap_inner = bootstrap  # type: ignore[attr-defined]

    def dump(self, path: Path, main: cProfile.Profile) -> None:
        stats = pstats.Stats(main)
        with self._lock:
            for profile in self._profiles:
                try:
                    stats.add(profile)
                except (TypeError, ValueError):  # a thread still running: its profile is mid-call
                    continue
        stats.dump_stats(str(path))


class StartWatch:
    """The campaign's progress callback: notes the rusage the moment every host has started
    its first attempt, which splits the start-up burst (connect, lease, facts, pushes) from
    the steady state."""

    def __init__(self, report: dict[str, Any], hosts: int) -> None:
        self._report, self._hosts = report, hosts
        self._running: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, host: str, **fields: Any) -> None:
        if fields.get("status") != "running":
            return
        with self._lock:
            self._running.add(host)
            if len(self._running) == self._hosts and "prepared" not in self._report:
                self._report["prepared"] = cpu_now()


def idle_connections(hosts: list[Any], transport: TransportSettings, seconds: float) -> dict[str, Any]:
    """Open one SSH session per host (as a campaign does), then do nothing for ``seconds``:
    what merely holding a host costs (liveness requests, the reaper, paramiko's own thread)."""
    from concurrent.futures import ThreadPoolExecutor

    from reprofleet.remote.transport import connect

    with ThreadPoolExecutor(max_workers=16) as pool:
        sessions = list(pool.map(lambda host: connect(host, transport), hosts))
    try:
        time.sleep(1.0)  # let every monitor settle into its rhythm
        before = cpu_now()
        threads = threading.active_count()
        time.sleep(seconds)
        after = cpu_now()
    finally:
        for session in sessions:
            session.close()
    return {"idle": {"sessions": len(sessions), "threads": threads, "before": before, "after": after}}


def whole_plan(inventory: str, playbook: str) -> tuple[Any, tuple[Any, ...]]:
    hosts = load_inventory(inventory).hosts
    return make_plan(load_playbook(playbook), hosts), hosts


def shard_plan(folder: Path) -> tuple[Any, tuple[Any, ...]]:
    """One shard's plan, from its folder alone, as its Slurm job's first run makes it."""
    from reprofleet.campaign.settings import ControllerConfig
    from reprofleet.campaign.shards import shard_request
    from reprofleet.cli.config import DEFAULTS

    request = shard_request(folder, ControllerConfig(dict(DEFAULTS)), {"SLURM_JOB_ID": "bench"})
    assert request.shard is not None and request.playbook is not None
    by_name = {h.name: h for h in load_inventory(request.inventory).hosts}
    hosts = tuple(by_name[name] for name in request.shard.hosts)
    return make_plan(load_playbook(request.playbook), hosts, request.shard.campaign, shard=request.shard), hosts


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--inventory")
    parser.add_argument("--playbook")
    parser.add_argument("--run-shard", help="run this shard's slice (a folder <campaign>/shard-<i>) instead")
    parser.add_argument("--reports", required=True)
    parser.add_argument("--known-hosts", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--sample-hz", type=float, default=10.0)
    parser.add_argument("--profile", help="write merged per-thread cProfile stats here")
    parser.add_argument("--idle-s", type=float, help="no campaign: hold one idle session per host this long")
    args = parser.parse_args(argv)
    out = Path(args.out)
    profiles = ThreadProfiles() if args.profile else None
    if profiles is not None:
        profiles.install()
    plan, hosts = shard_plan(Path(args.run_shard)) if args.run_shard else whole_plan(args.inventory, args.playbook)
    settings = RunSettings(transport=TransportSettings(known_hosts=Path(args.known_hosts)),
                           watchdog=WatchdogSettings(), controller=plan.shard.controller if plan.shard else "scale-bench",
                           sample_hz=args.sample_hz, **DEMO_WAITS)
    if args.idle_s:
        out.write_text(json.dumps(idle_connections(list(hosts), settings.transport, args.idle_s)) + "\n")
        return 0
    report: dict[str, Any] = {"hosts": len(hosts), "planned": plan.total_attempts, "start": cpu_now()}
    main_profile = cProfile.Profile(time.thread_time)
    if profiles is not None:
        main_profile.enable()
    result = run_campaign(plan, settings, Path(args.reports), recovery_factory=recovery_factory,
                          progress=StartWatch(report, len(hosts)))
    if profiles is not None:
        main_profile.disable()
        profiles.dump(Path(args.profile), main_profile)
    report.update(end=cpu_now(), campaign_dir=str(result.directory.root), records=len(result.records),
                  interrupted=result.interrupted, failure=result.failure)
    out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
