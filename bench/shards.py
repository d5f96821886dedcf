"""Shards: what one controller shard of K hosts costs beside one controller for all N*K hosts.

    flock /tmp/reprofleet-fleet.lock .venv/bin/python bench/shards.py --shards 2 --per-shard 8 --attempts 4
    .venv/bin/python bench/shards.py --report --results bench/RESULTS.md

One run brings up N*K simulated hosts (real sshd in network namespaces, as bench/scale.py),
then runs on them, one after the other: one controller for all N*K hosts (bench/scale_controller.py,
the campaign path), and shard 1 of N (the same child with ``--run-shard``: the slice and
campaign id its folder's shards.json names, written by the same slicing
``invoke campaign --shards`` uses, run into its own sub-folder as the submitted job runs it).
Each controller's CPU-seconds come from its rusage (``os.wait4``), peak RSS from its
``ru_maxrss``, its wall time from the bench's clock; the split at "every host started its
first attempt" separates the start-up burst from the steady state. Slurm itself is not in the
loop (no cluster here): what is measured is the controller's own cost per process. The
fleet is torn down in ``finally``; results go to bench/shards-results.json, ``--report``
writes the section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(BENCH))

from scale import CpuAcct, fleet_pids, git_head, read_campaign, run_controller, write_playbook  # noqa: E402

RESULTS_JSON = BENCH / "shards-results.json"
MARK = ("<!-- shards -->", "<!-- /shards -->")


def write_shards(reports: Path, inventory: Path, book: Path, names: list[str], count: int) -> Path:
    """The campaign folder a submission leaves (shards.json, one sub-folder per shard), without Slurm."""
    from reprofleet.campaign.shard_slices import slice_hosts
    from reprofleet.campaign.shards import ShardSet

    folder = reports / "shards-bench-campaign"
    for index in range(1, count + 1):
        (folder / f"shard-{index}").mkdir(parents=True, exist_ok=True)
    ShardSet("shards-bench-campaign", str(inventory), str(book), None, None, slice_hosts(names, count),
             "bench").write(folder)
    return folder


def controller_run(argv: list[str], acct: CpuAcct, max_wall_s: float, out: Path) -> dict[str, Any]:
    measured = run_controller(argv, acct, max_wall_s)
    measured.pop("cpu_series")
    child = json.loads(out.read_text()) if out.exists() else {}
    campaign = read_campaign(Path(child["campaign_dir"])) if child.get("campaign_dir") else {}
    startup = None
    if child.get("prepared") and child.get("start"):
        startup = (child["prepared"]["user_s"] + child["prepared"]["sys_s"]
                   - child["start"]["user_s"] - child["start"]["sys_s"])
    imports = child["start"]["user_s"] + child["start"]["sys_s"] if child.get("start") else None
    records = campaign.get("records", [])
    return {"hosts": child.get("hosts"), "records": len(records),
            "not_clean": sum(1 for r in records if r.get("outcome") != "clean"),
            "cpu_s": measured["controller_cpu_s"], "imports_cpu_s": imports, "startup_cpu_s": startup,
            "maxrss_mb": (measured["controller_maxrss_kb"] or 0) / 1024, "wall_s": measured["wall_s"],
            "threads_peak": measured["threads_peak"], "sim_cpu_s": measured["sim_cpu_s"],
            "machine_busy_s": measured["machine_busy_s"], "rc": measured["rc"]}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from reprofleet.sim import Fleet, SimHostSpec

    total = args.shards * args.per_shard
    specs = tuple(SimHostSpec(f"sh{i}", p_wedge=0.0, p_error=0.0, p_hang=0.0) for i in range(total))
    work = Path(tempfile.mkdtemp(prefix="rf-shards-"))
    fleet = Fleet.up(specs, ready_timeout_s=max(60.0, total * 1.0))
    acct = CpuAcct(f"rfs-shards-{fleet.run_id}").create()
    try:
        acct.adopt(fleet_pids(fleet))
        book = write_playbook(work, args.attempts, args.sleep_s, 120.0)
        common = [sys.executable, str(BENCH / "scale_controller.py"), "--known-hosts", str(fleet.known_hosts_path),
                  "--sample-hz", str(args.sample_hz)]
        whole = controller_run([*common, "--inventory", str(fleet.inventory_path), "--playbook", str(book),
                                "--reports", str(work / "whole"), "--out", str(work / "whole.json")],
                               acct, args.max_wall_s, work / "whole.json")
        folder = write_shards(work / "sharded", Path(fleet.inventory_path), book, [s.name for s in specs], args.shards)
        shard = controller_run([*common, "--run-shard", str(folder / "shard-1"), "--reports", str(work / "sharded"),
                                "--out", str(work / "shard.json")], acct, args.max_wall_s, work / "shard.json")
    finally:
        fleet.down()
        acct.remove()
    shutil.rmtree(work, ignore_errors=True)
    return {"shards": args.shards, "per_shard": args.per_shard, "attempts_per_host": args.attempts,
            "sleep_s": args.sleep_s, "sample_hz": args.sample_hz, "whole": whole, "shard": shard,
            "commit": git_head(), "date": time.strftime("%Y-%m-%d"),
            "command": " ".join(["bench/shards.py", *sys.argv[1:]])}


def row(name: str, measured: dict[str, Any]) -> str:
    def num(key: str, fmt: str) -> str:
        value = measured.get(key)
        return format(value, fmt) if isinstance(value, (int, float)) else "n/a"

    campaign = (measured["cpu_s"] - measured["imports_cpu_s"]) if measured.get("cpu_s") is not None \
        and measured.get("imports_cpu_s") is not None else None
    return (f"| {name} | {measured.get('hosts')} | {measured.get('records')} | {measured.get('not_clean')} | "
            f"{num('cpu_s', '.2f')} | {num('imports_cpu_s', '.2f')} | "
            f"{format(campaign, '.2f') if campaign is not None else 'n/a'} | {num('startup_cpu_s', '.2f')} | "
            f"{num('maxrss_mb', '.0f')} | {num('wall_s', '.1f')} | {measured.get('threads_peak')} |")


def markdown(runs: list[dict[str, Any]]) -> str:
    lines = [MARK[0], "## Shards: one controller shard against one controller for the same hosts (bench/shards.py)", ""]
    for entry in runs:
        lines += [f"Command: `flock /tmp/reprofleet-fleet.lock .venv/bin/python {entry['command']}` at "
                  f"`{entry['commit']}`, {entry['date']}, 2-core VM shared with other sessions' work; "
                  f"{entry['shards']} x {entry['per_shard']} simulated hosts (real sshd in network namespaces), "
                  f"{entry['attempts_per_host']} attempts per host of a PoC that sleeps {entry['sleep_s']:g} s "
                  f"(bench/scale_poc.py), NVML sampled at {entry['sample_hz']:g} Hz.", "",
                  "| controller | hosts | records | not clean | CPU-s (all) | of which imports | campaign CPU-s (all less "
                  "imports) | of which start-up | peak RSS MB | wall s | peak threads |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
                  row(f"one for all {entry['shards'] * entry['per_shard']} hosts", entry["whole"]),
                  row(f"shard 1 of {entry['shards']}", entry["shard"]), ""]
        whole, shard = entry["whole"], entry["shard"]
        if whole.get("cpu_s") and shard.get("cpu_s"):
            own = (shard["cpu_s"] - (shard["imports_cpu_s"] or 0)) / max(whole["cpu_s"] - (whole["imports_cpu_s"] or 0), 1e-9)
            lines += [f"One shard took {shard['cpu_s'] / whole['cpu_s']:.0%} of the single controller's CPU-seconds "
                      f"({own:.0%} of its campaign CPU-seconds, imports left out) "
                      f"and {shard['maxrss_mb'] / max(whole['maxrss_mb'], 1):.0%} of its peak RSS for "
                      f"{shard['hosts'] / max(whole['hosts'], 1):.0%} of its hosts; the imports (about "
                      f"{shard['imports_cpu_s'] or 0:.1f} CPU-s) are paid once per process, so N shards pay them "
                      "N times.", ""]
    by_size: dict[int, list[float]] = {}
    for entry in runs:
        if entry["whole"].get("cpu_s"):
            by_size.setdefault(entry["shards"] * entry["per_shard"], []).append(entry["whole"]["cpu_s"])
    for hosts, values in sorted(by_size.items()):
        if len(values) > 1:  # the same controller on the same hosts, measured again: the noise of this machine
            lines += [f"One controller for the same {hosts} hosts, measured {len(values)} times: "
                      f"{min(values):.2f} to {max(values):.2f} CPU-s ({max(values) / min(values) - 1:.0%} apart), "
                      "the machine's other load (about 8 on 2 cores while these ran) included.", ""]
    lines += ["What it shows and does not: per process, a shard's campaign CPU-seconds, start-up and threads follow "
              "its share of the hosts, which is what lets one campaign go past the ~400 hosts one controller process "
              "takes (the scale section); its peak RSS hardly does, since most of it is the interpreter and its "
              "imports, which every shard pays again (N shards: N times the memory floor and N times the import "
              "CPU-s, on the partition's nodes instead of one machine). Slurm's own overhead (scheduling, a job's "
              "start, a requeue's delay) is not in these numbers: no cluster ran; the shard is run from its folder "
              "as its job runs it (campaign/shards.py).", MARK[1]]
    return "\n".join(lines)


def write_section(results: Path, text: str) -> None:
    body = results.read_text()
    if MARK[0] in body:
        head, rest = body.split(MARK[0], 1)
        body = head + text + rest.split(MARK[1], 1)[1]
    else:
        body = body.rstrip("\n") + "\n\n" + text + "\n"
    results.write_text(body)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=int, default=2, help="N: how many shards the hosts are split into")
    parser.add_argument("--per-shard", type=int, default=8, help="K: hosts per shard")
    parser.add_argument("--attempts", type=int, default=4, help="attempts per host")
    parser.add_argument("--sleep-s", type=float, default=1.0, help="how long each attempt's PoC sleeps")
    parser.add_argument("--sample-hz", type=float, default=10.0)
    parser.add_argument("--max-wall-s", type=float, default=400.0, help="stop a controller after this long")
    parser.add_argument("--report", action="store_true", help="write the section from the results file")
    parser.add_argument("--results", help="with --report: the RESULTS.md to rewrite the section of")
    args = parser.parse_args()
    if args.report:
        runs = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.exists() else []
        text = markdown(runs)
        if args.results:
            write_section(Path(args.results), text)
        print(text)
        return 0
    result = run(args)
    runs = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.exists() else []
    runs = [r for r in runs if (r["shards"], r["per_shard"]) != (args.shards, args.per_shard)] + [result]
    RESULTS_JSON.write_text(json.dumps(runs, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("whole", "shard")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
