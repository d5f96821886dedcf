"""A simulated host's processes: one cgroup v1 freezer group per host.

sshd is started inside the group, so every session and every detached child of a session
lands there too. That makes the two hardware events exact: FROZEN is a host that hangs
(nothing runs, nothing answers), and killing every task in the group is a power cut.

The host's dockerd puts its containers in child groups (``<host>/docker/<id>``, in every
controller: sim/dockerd.py): v1's freezer is hierarchical, so FROZEN holds them too; a power
cut kills the tasks of the whole tree, and :func:`prune` removes the emptied child groups in
every controller, as a reboot forgets them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from reprofleet.sim.procs import SimError, wait_until

CGROUP_ROOT = Path("/sys/fs/cgroup")
FREEZER_ROOT = CGROUP_ROOT / "freezer"
CPU_ROOT = CGROUP_ROOT / "cpu"


class FreezerGroup:
    """The freezer cgroup that holds one simulated host's processes."""

    def __init__(self, name: str, root: Path = FREEZER_ROOT) -> None:
        self.name = name
        self.path = root / name

    def create(self) -> None:
        if not self.path.parent.is_dir():
            raise SimError(f"no cgroup v1 freezer at {self.path.parent} (needed to freeze hosts)")
        self.path.mkdir(exist_ok=True)

    def exists(self) -> bool:
        return self.path.is_dir()

    def pids(self) -> list[int]:
        try:
            text = (self.path / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(line) for line in text.split()]

    def tree_pids(self) -> list[int]:
        """The processes of the group and of every group below it (the host's containers)."""
        found: list[int] = []
        for folder in _tree(self.path):
            try:
                found += [int(line) for line in (folder / "cgroup.procs").read_text().split()]
            except OSError:
                continue
        return found

    def tasks(self) -> list[int]:
        """Every thread id (for signals that must reach all of them, e.g. SIGSTOP)."""
        try:
            return [int(line) for line in (self.path / "tasks").read_text().split()]
        except OSError:
            return []

    @property
    def state(self) -> str:
        try:
            return (self.path / "freezer.state").read_text().strip()
        except OSError:
            return "ABSENT"

    def freeze(self, timeout_s: float = 2.0) -> None:
        (self.path / "freezer.state").write_text("FROZEN")
        wait_until(lambda: self.state == "FROZEN", timeout_s, f"cgroup {self.name} to freeze")

    def thaw(self, timeout_s: float = 2.0) -> None:
        if not self.exists():
            return
        (self.path / "freezer.state").write_text("THAWED")
        wait_until(lambda: self.state == "THAWED", timeout_s, f"cgroup {self.name} to thaw")

    def kill_all(self, timeout_s: float = 5.0) -> None:
        """Power cut: freeze (no new forks), SIGKILL everyone, thaw so they die, repeat."""
        if not self.exists():
            return
        deadline = time.monotonic() + timeout_s
        for _ in range(50):  # bounded: each round kills everything that existed at its start
            pids = self.tree_pids()
            if not pids:
                return
            self.freeze()
            for pid in self.tree_pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.thaw()
            if wait_until(lambda: not self.tree_pids(), 0.5, "tasks to die", fail=False):
                return
            if time.monotonic() >= deadline:
                break
        raise SimError(f"cgroup {self.name} still has tasks {self.tree_pids()} after {timeout_s:g}s")

    def join(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def remove(self) -> None:
        if not self.exists():
            return
        self.kill_all()
        prune(self.name)
        # rmdir of an emptied cgroup can briefly fail with EBUSY while the last task exits.
        wait_until(lambda: _try_rmdir(self.path), 5.0, f"cgroup {self.name} to be removable")


class CpuGroup:
    """A cpu cgroup beside a host's freezer group, made only to starve the host of CPU.

    A quota caps every process of the host (sshd, the agent, the PoC) while the kernel's
    network stack keeps answering: a slow host, not a frozen one. Lifting the cap moves the
    processes back to the root cpu group and removes this one, so nothing is left behind.
    """

    PERIOD_US = 100_000

    def __init__(self, name: str, root: Path = CPU_ROOT) -> None:
        self.name = name
        self.root = root
        self.path = root / name
        self.freezer = FreezerGroup(name)
        self.spinners: list[subprocess.Popen[bytes]] = []

    def set_quota(self, percent: float | None, spinners: int = 0) -> None:
        """Cap the host at ``percent`` % of one CPU, with ``spinners`` busy loops of its own
        competing for that share (a host busy with work, not an idle one); None lifts it."""
        if percent is None:
            self.remove()
            return
        if not self.root.is_dir():
            raise SimError(f"no cgroup v1 cpu controller at {self.root} (needed to starve hosts)")
        self.path.mkdir(exist_ok=True)
        (self.path / "cpu.cfs_period_us").write_text(str(self.PERIOD_US))
        (self.path / "cpu.cfs_quota_us").write_text(str(max(1000, int(self.PERIOD_US * percent / 100))))
        self._move(self.freezer.pids(), self.path)
        for _ in range(spinners):
            self.spinners.append(subprocess.Popen(
                ["/bin/sh", "-c", f"echo $$ > {self.freezer.path}/cgroup.procs && echo $$ > {self.path}/cgroup.procs "
                 "&& exec /usr/bin/python3 -c 'while True: pass'"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def throttled(self) -> int:
        """How many CFS periods the host was throttled in (0 when not starved)."""
        try:
            stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
        except (OSError, ValueError):
            return 0
        return int(stat.get("nr_throttled", 0))

    def remove(self) -> None:
        for spinner in self.spinners:
            spinner.kill()
            spinner.wait(5)
        self.spinners = []
        if not self.path.is_dir():
            return
        (self.path / "cpu.cfs_quota_us").write_text("-1")
        for _ in range(20):  # bounded: forks racing the move are caught by the next pass
            pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            if not pids:
                break
            self._move(pids, self.root)
        if not _children(self.path):  # a running container's group below it keeps it (quota lifted)
            wait_until(lambda: _try_rmdir(self.path), 5.0, f"cpu cgroup {self.name} to be removable")

    @staticmethod
    def _move(pids: list[int], group: Path) -> None:
        for pid in pids:
            try:
                (group / "cgroup.procs").write_text(str(pid))
            except OSError:  # it exited meanwhile
                continue


def prune(name: str, root: Path = CGROUP_ROOT) -> list[Path]:
    """Remove the empty groups below ``<controller>/<name>`` in every cgroup v1 controller
    (what a host's containers left when the power went); returns those still busy."""
    busy = []
    for controller in sorted(root.iterdir()) if root.is_dir() else []:
        top = controller / name
        for folder in reversed(_tree(top)[1:]):  # deepest first
            if not _try_rmdir(folder):
                busy.append(folder)
        if controller.name not in ("freezer", "cpu") and top.is_dir() and not _children(top):
            _try_rmdir(top)  # made by runc as the containers' parent, not by us
    return busy


def _children(path: Path) -> list[Path]:
    try:
        return [p for p in path.iterdir() if p.is_dir()]
    except OSError:
        return []


def _tree(path: Path) -> list[Path]:
    """``path`` and every group below it, parents before children."""
    if not path.is_dir():
        return []
    found = [path]
    for child in sorted(_children(path)):
        found += _tree(child)
    return found


def _try_rmdir(path: Path) -> bool:
    try:
        path.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def groups_with_prefix(prefix: str, root: Path = FREEZER_ROOT) -> list[str]:
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and p.name.startswith(prefix))
