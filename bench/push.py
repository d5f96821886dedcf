"""Cache push on the simulated fleet: reprofleet's content-addressed push beside rsync and scp.

A deterministic cache (``--mib`` MiB, default 1024: many small files like torch.compile's
and FlashInfer's, and a few large blobs) goes to every host (``--hosts``, default 4) in
parallel, one thread per host, three ways over the same SSH (same key, same known_hosts):

- reprofleet: ``cache_sync.push`` (ask what is missing, stream the missing objects over
  one exec channel, each verified on the host before it counts);
- ``rsync -a`` over ``ssh``;
- ``scp -r`` (OpenSSH's scp, SFTP protocol).

Each tool copies into a folder of its own on each host; then each runs again with nothing
changed (the unchanged re-push). Wall time is per host from start to done, the slowest
host is the round's time. Goals (issue 12): an unchanged re-push under 1 s per host, a
first push within 20 % of rsync.

    flock /tmp/reprofleet-fleet.lock .venv/bin/python bench/push.py            # writes RESULTS.md
    flock /tmp/reprofleet-fleet.lock .venv/bin/python bench/push.py --mib 64 --no-write   # a quick look
"""

from __future__ import annotations

import argparse
import hashlib
import random
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import rewrite_section  # noqa: E402

from reprofleet.runner import cache_sync
from reprofleet.remote.agent import AgentClient, load_bundle  # noqa: E402
from reprofleet.inventory import load_inventory  # noqa: E402
from reprofleet.model import Host  # noqa: E402
from reprofleet.sim import Fleet, SimHostSpec  # noqa: E402
from reprofleet.remote.ssh import SshTarget  # noqa: E402
from reprofleet.remote.transport import TransportSettings, connect  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SOURCE = Path("/var/lib/reprofleet-bench/push-cache")  # not /tmp: simulated hosts shadow it


def make_cache(root: Path, mib: int, seed: int = 12) -> tuple[int, int]:
    """Half the bytes in small files (1-64 KiB, a few thousand), half in four large blobs.
    Deterministic: the same --mib and seed give the same bytes (a marker file says which)."""
    marker = root.parent / f"{root.name}.made"  # which --mib and seed the folder holds
    if marker.exists() and marker.read_text() == f"{mib}-{seed}\n":
        files = [p for p in root.rglob("*") if p.is_file()]
        return len(files), sum(p.stat().st_size for p in files)
    shutil.rmtree(root, ignore_errors=True)
    marker.unlink(missing_ok=True)
    rng = random.Random(seed)
    total, small_budget, count = 0, mib << 19, 0
    while total < small_budget:
        size = rng.randint(1 << 10, 64 << 10)
        folder = root / "torch_compile_cache" / f"{rng.getrandbits(32):08x}"[:2] / f"rank_{count % 8}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"graph_{count}.bin").write_bytes(rng.randbytes(size))
        total, count = total + size, count + 1
    blobs = root / "models"
    blobs.mkdir(parents=True, exist_ok=True)
    each = ((mib << 20) - total) // 4
    for index in range(4):
        block = hashlib.sha256(f"{seed}-{index}".encode()).digest() * 32768  # 1 MiB, distinct per blob
        with open(blobs / f"blob{index}.bin", "wb") as out:
            left = each
            while left > 0:
                piece = rng.randbytes(min(left, 1 << 20)) if index % 2 else block[:min(left, 1 << 20)]
                out.write(piece)
                left -= len(piece)
        total += each
        count += 1
    marker.write_text(f"{mib}-{seed}\n")
    return count, total


def ssh_options(fleet: Any, host: Host) -> list[str]:
    return ["-i", str(fleet.key_path), "-o", f"UserKnownHostsFile={fleet.known_hosts_path}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-p", str(host.port)]


def rsync_to(fleet: Any, host: Host) -> None:
    ssh = " ".join(["ssh", *ssh_options(fleet, host)])
    subprocess.run(["rsync", "-a", "-e", ssh, f"{SOURCE}/", f"root@{host.address}:bench-rsync/"], check=True,
                   timeout=1800)


def scp_to(fleet: Any, host: Host) -> None:
    options = [o.replace("-p", "-P") if o == "-p" else o for o in ssh_options(fleet, host)]
    subprocess.run(["scp", "-q", "-r", *options, str(SOURCE), f"root@{host.address}:bench-scp"], check=True,
                   timeout=1800)


def reprofleet_to(fleet: Any, snap: cache_sync.Snapshot, host: Host, paramiko: bool = False) -> None:
    session = connect(host, TransportSettings(known_hosts=Path(fleet.known_hosts_path)))
    try:
        agent = AgentClient(session, load_bundle(), host.python)
        agent.push()
        cache_sync.push(agent, snap, None if paramiko else SshTarget(host, Path(fleet.known_hosts_path)))
    finally:
        session.close()


def timed_round(hosts: list[Host], one: Callable[[Host], None]) -> list[float]:
    """Every host at once, one thread each; seconds per host."""
    def run(host: Host) -> float:
        started = time.monotonic()
        one(host)
        return time.monotonic() - started

    with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
        return list(pool.map(run, hosts))


def clean_hosts(fleet: Any) -> None:
    for host in fleet.hosts:
        home = host.paths.fs("root")
        for name in ("bench-rsync", "bench-scp", ".cache/reprofleet/objects", ".cache/reprofleet/snapshots"):
            shutil.rmtree(home / name, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--no-write", action="store_true", help="print the table, leave RESULTS.md alone")
    args = parser.parse_args()
    files, size = make_cache(SOURCE, args.mib)
    started = time.monotonic()
    snap = cache_sync.build_snapshot(SOURCE)
    hash_s = time.monotonic() - started
    print(f"cache: {files} files, {size / 2**20:.0f} MiB, {len(snap.objects())} objects; manifest in {hash_s:.1f} s",
          flush=True)
    fleet = Fleet.up(tuple(SimHostSpec(f"push{i}") for i in range(args.hosts)))
    rows: list[tuple[str, list[float], list[float]]] = []
    try:
        hosts = list(load_inventory(fleet.inventory_path).hosts)
        clean_hosts(fleet)
        tools: list[tuple[str, Callable[[Host], None]]] = [
            ("reprofleet (content-addressed; objects over the ssh binary, as campaigns push)",
             lambda h: reprofleet_to(fleet, snap, h)),
            ("reprofleet, objects over paramiko's exec channel instead (measured, not chosen)",
             lambda h: reprofleet_to(fleet, snap, h, paramiko=True)),
            ("rsync -a", lambda h: rsync_to(fleet, h)), ("scp -r", lambda h: scp_to(fleet, h))]
        for name, tool in tools:
            if name.startswith("reprofleet"):
                clean_hosts(fleet)  # each variant starts from hosts that have nothing
            first = timed_round(hosts, tool)
            again = timed_round(hosts, tool) if not name.startswith("scp") else []
            rows.append((name, first, again))
            print(name, [f"{s:.2f}" for s in first], [f"{s:.2f}" for s in again], flush=True)
        verify = verify_hosts(fleet, snap)
    finally:
        clean_hosts(fleet)
        fleet.down()
    body = table(rows, files, size, len(snap.objects()), hash_s, args, verify)
    print(body)
    if not args.no_write:
        rewrite_section(REPO / "bench" / "RESULTS.md", "push", "Cache push: content-addressed vs rsync and scp "
                        "(bench/push.py)", body)
    return 0


def verify_hosts(fleet: Any, snap: cache_sync.Snapshot) -> str:
    """Every host's store holds every object under its own name (re-hashed here)."""
    bad = 0
    for host in fleet.hosts:
        objects = host.paths.fs("root") / ".cache" / "reprofleet" / "objects"
        for sha in snap.objects():
            if cache_sync.file_sha256(objects / sha) != sha:
                bad += 1
    return f"{len(fleet.hosts) * len(snap.objects())} objects re-hashed on the hosts' disks, {bad} wrong"


def table(rows: list[tuple[str, list[float], list[float]]], files: int, size: int, objects: int, hash_s: float,
          args: argparse.Namespace, verify: str) -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=REPO).stdout.strip()
    lines = [f"`flock /tmp/reprofleet-fleet.lock .venv/bin/python bench/push.py --mib {args.mib} --hosts {args.hosts}`"
             f" at `{head}`, {time.strftime('%Y-%m-%d')}, on this 2-core VM (controller, sshd and hosts share "
             f"the 2 cores and one disk).", "",
             f"Cache: {files} files ({size / 2**20:.0f} MiB; {objects} distinct objects), to {args.hosts} hosts in "
             f"parallel. The controller's manifest (sha256 of every file) took {hash_s:.1f} s, once per campaign.",
             "", "| tool | first push: slowest host (s) | per host (s) | unchanged re-push: slowest host (s) |",
             "|---|---:|---|---:|"]
    for name, first, again in rows:
        lines.append(f"| {name} | {max(first):.2f} | {', '.join(f'{s:.2f}' for s in first)} | "
                     f"{max(again):.2f} |" if again else
                     f"| {name} | {max(first):.2f} | {', '.join(f'{s:.2f}' for s in first)} | (copies everything "
                     "again) |")
    lines += ["", f"Verification: {verify}."]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
