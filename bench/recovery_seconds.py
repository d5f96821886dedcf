"""Controller-added seconds per wedge: the reboot grace always waited (the rule before issue 18,
the naive baseline) against the grace the host's facts decide (runner/self_reset_grace.py).

Each arm is one real campaign (``run_campaign``: the real agent gathers the host's facts
over SSH, the real Recovery cycles it through a Tasmota plug simulator on loopback) on one
simulated host that has no hardware watchdog, ``kernel.panic`` = 0, no lockup panics and
no kdump, as the simulated fleet's hosts are unless told otherwise, and whose every
attempt wedges. The recovery settings are the shipped ones (invoke.yaml: dwell 10 s,
stability 5 s, reboot grace 30 s). The baseline runs the same code with the grace decision
replaced by "always the configured grace"; nothing else differs between the arms.

Per wedge, from the campaign's own files (controller clock, milliseconds):

- declared -> off: the record's ``wedge_declared`` to the outlet read back off (the grace,
  the partition guard, a banner probe, the driver's request and read-back);
- off -> on: the dwell and the switch-on with its read-back;
- on -> booted: the host's boot, which is the host's and is excluded;
- booted -> ready: the stability window, the post-boot forensics and the health gate (the
  agent's ``health`` over SSH, also timed on its own).

Controller-added = declared -> on + booted -> ready.

    flock /tmp/reprofleet-fleet.lock .venv/bin/python bench/recovery_seconds.py --wedges 4 --results bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import rewrite_section  # noqa: E402

from reprofleet.campaign.run import make_plan, run_campaign  # noqa: E402
from reprofleet.inventory import load_inventory  # noqa: E402
from reprofleet.liveness.watchdog import WatchdogSettings  # noqa: E402
from reprofleet.playbook import load_playbook  # noqa: E402
from reprofleet.records.store import read_log_lines, read_records  # noqa: E402
from reprofleet.remote import agent as agent_module  # noqa: E402
from reprofleet.remote.transport import TransportSettings  # noqa: E402
from reprofleet.runner import self_reset_grace  # noqa: E402
from reprofleet.runner.host import RunSettings  # noqa: E402
from reprofleet.runner.recovery import recovery_factory  # noqa: E402
from reprofleet.sim import Fleet, SimHostSpec  # noqa: E402
from reprofleet.sim.power import HttpPlugServer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
POC = REPO / "playbooks" / "poc" / "sm120_hostwedge.py"
SHIPPED = {"dwell_s": 10.0, "stability_s": 5.0, "reboot_grace_s": 30.0}  # invoke.yaml / cli/config.py DEFAULTS
ARMS = ("before", "after")


def _seconds(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _playbook(folder: Path, attempts: int) -> Path:
    (folder / "poc").mkdir(parents=True, exist_ok=True)
    shutil.copy(POC, folder / "poc" / POC.name)
    path = folder / "book.yml"
    path.write_text(
        "name: recovery-seconds\n"
        f"poc: {{script: poc/{POC.name}}}\n"
        "runtime: {kind: docker, image: 'vllm/vllm-openai:v0.25.1', docker_args: [--ipc, host]}\n"
        f"attempts: {attempts}\n"
        "timeouts: {attempt: 60, boot: 60}\n"
        "defaults:\n  args: {spec_tokens: 9, gpu_memory_utilization: 0.87}\n"
        "matrix:\n  - name: default\n")
    return path


def _always_the_grace(facts: Any, default_s: float, applied: Any = None) -> tuple[float, str]:
    return default_s, f"grace {default_s:g} s: always (the rule before issue 18)"


def _timed_health(calls: list[float]) -> Callable[..., Any]:
    original = agent_module.AgentClient.health

    def health(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return original(self, *args, **kwargs)
        finally:
            calls.append(time.monotonic() - started)
    return health


def run_arm(arm: str, fleet: Fleet, plug: HttpPlugServer, work: Path, wedges: int) -> dict[str, Any]:
    host = fleet.hosts[0]
    inventory = fleet.write_inventory(work / f"inventory-{arm}.yml", pdu={host.name: plug.pdu_block("1", None)})
    plan = make_plan(load_playbook(_playbook(work / f"book-{arm}", wedges)), load_inventory(inventory).hosts)
    settings = RunSettings(transport=TransportSettings(known_hosts=Path(fleet.known_hosts_path)),
                           watchdog=WatchdogSettings(), controller="bench", sample_hz=5.0, **SHIPPED)
    health_calls: list[float] = []
    decide, health = self_reset_grace.self_reset_grace_s, agent_module.AgentClient.health
    if arm == "before":
        self_reset_grace.self_reset_grace_s = _always_the_grace  # type: ignore[assignment]
    agent_module.AgentClient.health = _timed_health(health_calls)  # type: ignore[method-assign]
    started = time.monotonic()
    try:
        result = run_campaign(plan, settings, work / f"reports-{arm}", recovery_factory=recovery_factory)
    finally:
        self_reset_grace.self_reset_grace_s = decide  # type: ignore[assignment]
        agent_module.AgentClient.health = health  # type: ignore[method-assign]
    took = time.monotonic() - started
    records = sorted(read_records(result.directory.attempts), key=lambda r: r["attempt_index"])
    events = read_log_lines(result.directory.events)
    return {"arm": arm, "campaign_s": round(took, 1), "outcomes": [r["outcome"] for r in records],
            "wedges": _per_wedge(records, events), "health_call_s": [round(s, 3) for s in health_calls],
            "grace_words": sorted({e.get("message") for e in events if e.get("event") == "self_reset_grace"})}


def _per_wedge(records: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Each wedge's segments, from its declaration to the next recovery's ``ready``."""
    recovery = [(e["to"], _seconds(e["t"])) for e in events if e.get("event") == "recovery"]
    found = []
    for record in records:
        if record["outcome"] != "wedge" or not record.get("wedge_declared"):
            continue
        declared = _seconds(record["wedge_declared"])
        after = [(state, t) for state, t in recovery if t >= declared]
        first: dict[str, float] = {}
        for state, t in after:
            first.setdefault(state, t)
            if state == "ready":
                break
        if not all(s in first for s in ("off", "on", "booted", "ready")):
            continue
        segments = {"declared_to_off": first["off"] - declared, "off_to_on": first["on"] - first["off"],
                    "on_to_booted": first["booted"] - first["on"], "booted_to_ready": first["ready"] - first["booted"]}
        segments["controller_added"] = (segments["declared_to_off"] + segments["off_to_on"]
                                        + segments["booted_to_ready"])
        found.append({k: round(v, 3) for k, v in segments.items()})
    return found


def summary(arm: dict[str, Any], key: str) -> str:
    values = [w[key] for w in arm["wedges"]]
    if not values:
        return "n/a"
    return f"median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f})"


def _commit() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "src", "collectors"], cwd=REPO, capture_output=True,
                           text=True).stdout.strip()
    return head + ("+uncommitted" if dirty else "")


def report(results: dict[str, Any], command: str) -> str:
    before, after = (results[a] for a in ARMS)
    rows = [("wedge declared -> outlet off", "declared_to_off"), ("outlet off -> on (dwell, read-back)", "off_to_on"),
            ("on -> booted (the host's boot: excluded)", "on_to_booted"),
            ("booted -> ready (stability, forensics, health gate)", "booted_to_ready"),
            ("controller-added (declared -> on + booted -> ready)", "controller_added")]
    lines = [f"Command: `{command}` (commit {results['commit']}, {results['date']}, {results['machine']}); "
             f"each arm one campaign of {results['wedges']} wedges on one simulated host (no watchdog, "
             "kernel.panic=0, no lockup panics, no kdump), cycled through a Tasmota plug simulator; shipped "
             "recovery settings (dwell 10 s, stability 5 s, reboot grace 30 s).", "",
             "| per wedge | before: grace always (naive) | after: the facts decide |", "| --- | --- | --- |"]
    lines += [f"| {label} | {summary(before, key)} | {summary(after, key)} |" for label, key in rows]
    saved = [b["controller_added"] - a["controller_added"] for b, a in zip(before["wedges"], after["wedges"])]
    health = before["health_call_s"] + after["health_call_s"]
    lines += ["", f"- Wedges measured: before {len(before['wedges'])}, after {len(after['wedges'])}; outcomes "
              f"{before['outcomes']} / {after['outcomes']}; whole campaigns {before['campaign_s']} s / "
              f"{after['campaign_s']} s.",
              f"- Saved per wedge (before - after, pairwise): median {statistics.median(saved):.2f} s." if saved else "",
              f"- The health gate's agent call (`health` over SSH, in booted -> ready of both arms): median "
              f"{statistics.median(health):.2f} s, max {max(health):.2f} s over {len(health)} calls." if health else "",
              f"- The grace's words: before {before['grace_words']}; after {after['grace_words']}.",
              "- What is measured beyond the configured constants: the grace skipped is the configured 30 s, so "
              "before - after is that constant plus what the grace loop itself cost (its first probe of a frozen "
              "host, DEAD after its 1 s timeout, and the last poll's overshoot); the rest of declared -> off is the "
              "system's own: the last banner probe before the cut (\"declared wedged, but the host answered?\"), "
              "which waits out its 2 s timeout on a host that drops every packet, then ~0.01 s for the partition "
              "guard, the driver and the plug's off with read-back on loopback. off -> on is the 10 s dwell and the on with "
              "read-back; booted -> ready is the 5 s stability window, the post-boot forensics and the health gate."]
    return "\n".join(line for line in lines if line is not None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wedges", type=int, default=4, help="wedges per arm")
    parser.add_argument("--json", default=str(REPO / "bench" / "recovery-results.json"))
    parser.add_argument("--results", default=None, help="rewrite this RESULTS.md's recovery section")
    parser.add_argument("--report", action="store_true", help="only rewrite the section from --json (no fleet)")
    args = parser.parse_args()
    if args.report:
        results = json.loads(Path(args.json).read_text())
        return _write(results, args.results)
    work = Path(tempfile.mkdtemp(prefix="rf-recovery-bench-", dir="/var/lib"))
    spec = SimHostSpec("rec", script=("wedge",) * (2 * args.wedges), time_scale=0.02, boot_delay_s=2.0)
    fleet = Fleet.up((spec,))
    plug = HttpPlugServer(work / "pdu", "tasmota", {"1": fleet.hosts[0].paths.power}).start()
    results: dict[str, Any] = {"wedges": args.wedges, "commit": _commit(), "date": time.strftime("%Y-%m-%d"),
                               "machine": f"{__import__('os').cpu_count()}-core VM"}
    try:
        for arm in ARMS:
            results[arm] = run_arm(arm, fleet, plug, work, args.wedges)
            print(json.dumps(results[arm]), flush=True)
    finally:
        plug.stop()
        fleet.down(remove_files=True)
        shutil.rmtree(work, ignore_errors=True)
    Path(args.json).write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    return _write(results, args.results)


def _write(results: dict[str, Any], results_md: str | None) -> int:
    command = "flock /tmp/reprofleet-fleet.lock .venv/bin/python bench/recovery_seconds.py " \
              f"--wedges {results['wedges']} --results bench/RESULTS.md"
    body = report(results, command)
    print(body)
    if results_md:
        rewrite_section(Path(results_md), "recovery", "Recovery: controller-added seconds per wedge "
                        "(bench/recovery_seconds.py)", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
