"""Every simulated host's dockerd starts with the fleet's images already in its data root.

A real lab's hosts have pulled their images long before a campaign; what a campaign meets is a
daemon whose image store already holds them. Loading them into every host at every ``Fleet.up``
(``docker load`` of a 52 MB archive: about 0.9 s of CPU a host, measured on a 2-core machine)
made the daemons the largest cost of the fleet tests, so the store is made once per machine and
copied instead:

* a **builder daemon** (Debian's ``dockerd`` in this machine's namespaces, its own data and exec
  roots under the cache, ``--bridge=none --iptables=false``, stopped afterwards) builds the
  images' archive (sim/images.py) when the cache lacks it, and a second one, started on an
  empty data root, ``docker load``-s it;
* that daemon's **image store** (``image/`` and ``overlay2/``: the image and layer databases and
  the layers' files) is kept in the cache, keyed by the archive's key, the daemon's engine id,
  networks, containerd state and build cache left out (each host's daemon makes its own at its
  first start);
* each host's data root is filled from it (``cp -a``) at fleet setup, before the host's first
  boot, as a stopped daemon's data root is moved to a new disk (IBM's "Relocating the Docker
  root directory": stop the daemon, copy /var/lib/docker, start it on the copy): every host has
  the same image ids and no repo digests, as after ``docker load``.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from reprofleet.sim import images
from reprofleet.sim.dockerd import CLIENT, DOCKERD, client_answers
from reprofleet.sim.procs import SimError, run

KEPT = ("image", "overlay2")  # the image store; everything else a daemon makes for itself
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


def store_path(cache_dir: Path, versions: Sequence[str]) -> Path:
    archive, _ = images.archive_path(cache_dir, versions)
    return cache_dir / archive.name.replace("vllm-images-", "image-store-").removesuffix(".tar")


def ensure_store(cache_dir: Path, versions: Sequence[str]) -> Path:
    """The cached image store holding the images of ``versions``, made now if the cache lacks
    it. Fleets that start at once (the test workers) make it once: the others wait on a lock."""
    target = store_path(cache_dir, versions)
    if target.is_dir():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _locked(cache_dir / ".image-store.lock"):
        if target.is_dir():
            return target
        sweep_builds(cache_dir)
        work = cache_dir / f".build-{os.getpid()}"
        try:
            with builder_daemon(work / "build") as docker:
                archive = images.ensure_archive(docker, cache_dir, versions)
            with builder_daemon(work / "load") as docker:
                images.load(docker, archive)
            staged = work / "store"
            staged.mkdir()
            for name in KEPT:
                os.replace(work / "load" / "data" / name, staged / name)
            os.replace(staged, target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target


def sweep_builds(cache_dir: Path) -> None:
    """What a build killed mid-way left (it runs under the lock, so none is running): its
    builder daemons, found by their pid files and checked by their command lines, and their
    folders."""
    for work in cache_dir.glob(".build-*"):
        for pidfile in work.glob("*/dockerd.pid"):
            try:
                pid = int(pidfile.read_text().strip())
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except (OSError, ValueError):
                continue
            if str(pidfile.parent).encode() in cmdline:  # that daemon, not a pid reused since
                try:
                    os.killpg(pid, signal.SIGKILL)  # dockerd leads its session: it and its containerd
                except ProcessLookupError:
                    pass
        for mounted in (*work.glob("*/exec"), *work.glob("*/data")):  # its layers' and its netns' mounts
            run(["umount", "-R", "--lazy", str(mounted)], check=False)
        shutil.rmtree(work, ignore_errors=True)


def fill(store: Path, data_root: Path) -> None:
    """Copy the image store into a host's (empty) data root, before its daemon first starts."""
    if any(data_root.iterdir()):
        return  # a daemon's data root already: never overwrite what it holds
    for name in KEPT:
        run(["cp", "-a", str(store / name), str(data_root / name)], timeout_s=120.0)


@contextmanager
def builder_daemon(work: Path) -> Iterator[list[str]]:
    """A dockerd of this machine's own for building and loading images, with its data root,
    exec root and socket under ``work``; yields the client argv that talks to it, and stops it
    (and its containerd) when the block ends."""
    data, execroot = work / "data", work / "exec"
    for folder in (data, execroot):
        folder.mkdir(parents=True, exist_ok=True)
    (work / "daemon.json").write_text("{}\n")  # not the machine's /etc/docker/daemon.json
    sock = work / "docker.sock"
    log = (work / "dockerd.log").open("ab")
    daemon = subprocess.Popen(
        [str(DOCKERD), "--data-root", str(data), "--exec-root", str(execroot), "--pidfile", str(work / "dockerd.pid"),
         "-H", f"unix://{sock}", "--config-file", str(work / "daemon.json"), "--iptables=false", "--ip-masq=false",
         "--bridge=none", "--userland-proxy=false", "--log-level", "warn"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    log.close()
    docker = [str(CLIENT), "-H", f"unix://{sock}"]
    try:
        _wait_answers(docker, daemon, work)
        yield docker
    finally:
        _stop(daemon)
        for mounted in (execroot, data):
            run(["umount", "-R", "--lazy", str(mounted)], check=False)


def _wait_answers(docker: list[str], daemon: subprocess.Popen[bytes], work: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            raise SimError(f"the image builder's dockerd exited with {daemon.returncode}; see {work / 'dockerd.log'}")
        if client_answers(docker, 10.0):
            return
        time.sleep(0.1)
    raise SimError(f"the image builder's dockerd did not answer within {READY_TIMEOUT_S:g}s; see {work / 'dockerd.log'}")


def _stop(daemon: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as systemd stops docker.service: dockerd stops its containerd and unmounts its
    layers; SIGKILL to the whole session if it does not end in time."""
    if daemon.poll() is None:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(daemon.pid, signal.SIGKILL)  # its containerd, if dockerd left it behind
    except ProcessLookupError:
        pass
    daemon.wait()


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One build at a time on this machine; a waiting fleet blocks until the build ends (each
    of its steps is bounded by its own timeout)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
