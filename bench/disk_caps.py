"""What hosts' volume costs the controller's disk (issue 34, item 2), before and after the caps.

Two cases from the issue, each through the controller's own code with its defaults:

- ``stream``: a PoC printing ``yes x | head -c 2000000``, run by the real agent (``run`` with an
  attempt key, so every line carries its MAC, as in a campaign); the lines it sent are written
  through ``StreamWriter`` as the attempt follower writes them. Reported: the PoC's output, the
  bytes the agent sent (the envelope per line), the stream file on disk, the time to write it.
- ``netconsole``: 240,000 bytes in 4 spoofed plain-text datagrams of ``x\\n`` from a host's
  address, over loopback to a receiver (its thread not started: the bench polls it). Reported:
  lines and bytes filed in the host's file, and the longest time the receiver's lock was held.

    PYTHONPATH=<tree>/src python bench/disk_caps.py --label after --results bench/RESULTS.md

``--label`` names the run in bench/disk-caps-results.json (``before`` ran with main's ``src``
first on PYTHONPATH); ``--results`` rewrites the RESULTS.md section from every run kept there.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import rewrite_section  # noqa: E402

from reprofleet.records.store import StreamWriter  # noqa: E402
from reprofleet.remote.netconsole import NetconsoleReceiver  # noqa: E402

ROOT = Path(sys.modules[StreamWriter.__module__].__file__ or ".").resolve().parents[3]  # the tree measured
AGENT = ROOT / "collectors" / "agent.py"  # its agent too: the envelope is the agent's
KEPT = Path(__file__).resolve().parent / "disk-caps-results.json"


def agent_lines(work: Path) -> list[bytes]:
    """The lines the real agent sends for the 2 MB PoC, signed with an attempt key."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "fixtures" / "agent_fakes" / "no_nvml")}
    argv = [sys.executable, str(AGENT), "--state-dir", str(work / "state"), "run", "--id", "bench1",
            "--timeout", "120", "--key-stdin", "--", "sh", "-c", "yes x | head -c 2000000"]
    done = subprocess.run(argv, input=(secrets.token_hex(32) + "\n").encode(), env=env, capture_output=True,
                          timeout=300, check=False)
    return done.stdout.splitlines()


def stream_case(work: Path) -> dict[str, Any]:
    lines = agent_lines(work)
    logs = [line for line in lines if b'"k":"log"' in line]
    path = work / "stream.jsonl"
    writer = StreamWriter(path)
    started = time.perf_counter()
    for line in lines:
        writer.write(line.decode())
    writer.close()
    seconds = time.perf_counter() - started
    sent = sum(len(line) + 1 for line in lines)
    return {"poc_output": 2_000_000, "log_lines": len(logs), "agent_sent": sent,
            "bytes_per_log_line": round(sum(len(line) + 1 for line in logs) / max(1, len(logs)), 1),
            "on_disk": path.stat().st_size, "write_s": round(seconds, 2)}


class TimedLock:
    """The receiver's lock, timing how long each hold lasts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since = 0.0
        self.longest = 0.0

    def __enter__(self) -> "TimedLock":
        self._lock.acquire()
        self._since = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.longest = max(self.longest, time.perf_counter() - self._since)
        self._lock.release()


def netconsole_case(work: Path) -> dict[str, Any]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    folder = work / "netconsole"
    rx = NetconsoleReceiver([port], {"127.0.0.1": "ws01"}, folder, bind="127.0.0.1")
    lock = TimedLock()
    rx._lock = lock  # type: ignore[assignment]  # a bench may look inside
    flood = b"x\n" * 30_000
    started = time.perf_counter()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as out:
            for pair in range(2):  # two at a time: a socket's receive buffer holds ~200 kB
                for _ in range(2):
                    out.sendto(flood, ("127.0.0.1", port))
                rx.poll_once(5.0)
    finally:
        rx.close()
    seconds = time.perf_counter() - started
    path = folder / "ws01.jsonl"
    text = path.read_bytes() if path.exists() else b""
    return {"sent": 4 * len(flood), "datagrams": 4, "lines_sent": 4 * 30_000, "lines_filed": text.count(b"\n"),
            "bytes_filed": len(text), "longest_lock_hold_s": round(lock.longest, 3), "poll_s": round(seconds, 3)}


def code_commit() -> str:
    where = Path(sys.modules[StreamWriter.__module__].__file__ or ".").resolve().parent
    head = subprocess.run(["git", "-C", str(where), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--", "."],
                           capture_output=True, text=True, check=False).stdout.strip()
    return head + ("+dirty" if dirty else "")


def section(kept: dict[str, Any]) -> str:
    lines = ["Command: `PYTHONPATH=<tree>/src python bench/disk_caps.py --label <label> --results bench/RESULTS.md`, "
             "`before` with main's tree (the commit named), `after` with this branch's; the default caps "
             "(stream_cap_mb 32; netconsole: 500 lines parsed per datagram, a filing budget of 10,000 lines "
             "burst and 1,000 lines/s). 2-core VM shared with other work: wall times are indicative.", "",
             "| run | code commit | date | 2 MB PoC: log lines | bytes per log line sent | agent sent | stream on disk "
             "| write s | spoof: lines sent | lines filed | bytes filed | longest lock hold s |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for label, run in kept.items():
        s, n = run["stream"], run["netconsole"]
        lines.append(f"| {label} | {run['commit']} | {run['date']} | {s['log_lines']} | {s['bytes_per_log_line']} | "
                     f"{s['agent_sent']} | {s['on_disk']} | {s['write_s']} | {n['lines_sent']} | {n['lines_filed']} | "
                     f"{n['bytes_filed']} | {n['longest_lock_hold_s']} |")
    lines += ["", "The stream's size is the envelope of one-character lines: each carries its time, kind, seq "
              "and MAC (`{\"t\":…,\"k\":\"log\",\"seq\":N,\"line\":\"x\",\"mac\":\"<64 hex>\"}`); the constant "
              "`\"stream\":\"out\"` is gone from the agent (15 bytes a line). The rest is what a line needs, so the "
              "cap is what bounds the file: its head, a `stream_cut` marker with the count, and its last lines. "
              "The spoofed datagrams are parsed only as far as a kernel's datagram could hold lines (500) and "
              "the filing budget allows; the rest is counted and noted in the file (the one extra line filed). "
              "The 2 MB PoC made fewer than its 1,000,000 log lines in both runs (with an attempt key; "
              "without one, all 1,000,000 came): lines lost between the PoC and the agent's stream, "
              "not investigated here."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", required=True)
    parser.add_argument("--results", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="disk-caps-") as work:
        run = {"commit": code_commit(), "date": datetime.date.today().isoformat(),
               "stream": stream_case(Path(work)), "netconsole": netconsole_case(Path(work))}
    kept = json.loads(KEPT.read_text()) if KEPT.exists() else {}
    kept[args.label] = run
    KEPT.write_text(json.dumps(kept, indent=1) + "\n")
    print(json.dumps(run, indent=1))
    if args.results:
        rewrite_section(args.results, "disk-caps", "Bounded disk for streams and netconsole (bench/disk_caps.py)",
                        section(kept))


if __name__ == "__main__":
    main()
