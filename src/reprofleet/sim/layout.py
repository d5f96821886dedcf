"""Where a simulated fleet keeps its state on the machine that runs it.

Everything a host owns lives under ``<fleet>/hosts/<name>/``, outside the paths the host's
mount namespace shadows, so that the controller, the hardware daemon and the tests can read
it from the root namespace while the host sees its own view:

    <fleet>/fleet.json            what was built (run id, subnet, hosts, daemon)
    <fleet>/id_ed25519[.pub]      the fleet's client key (root login on every host)
    <fleet>/authorized_keys, known_hosts, inventory.yml, hardware.jsonl, hardware.log
    <fleet>/hosts/<name>/ssh/     host key (kept across reboots), sshd_config, sshd.pid, sshd.log
    <fleet>/hosts/<name>/boot.sh  what "power on" runs inside the host's namespaces
    <fleet>/hosts/<name>/services/ the host's boot services (slurmd ...): each executable there is
                                  started by boot.sh beside sshd, in the host's namespaces and cgroup
    <fleet>/hosts/<name>/fs/      per-host trees bind-mounted over /root, /tmp, /var/tmp,
                                  /usr/local/bin, dist-packages, /etc/reprofleet-sim, /var/log
                                  (and, for a non-root login, /home and /etc/passwd, /etc/group)
    <fleet>/hosts/<name>/docker/  the host's dockerd: data root (images, containers) and daemon.json
    <fleet>/hosts/<name>/hw/      the "hardware": power switch, GPU state, boots, requests
                                  (also visible inside the host at /etc/reprofleet-sim/hw)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_BASE = Path("/var/lib/reprofleet-sim")
REGISTRY_DIR = Path("/run/reprofleet-sim")
HOST_ETC = Path("/etc/reprofleet-sim")
HOST_DIST_PACKAGES = Path("/usr/local/lib/python3.11/dist-packages")
PREFIX = "rfs"

TMP = Path("/tmp")  # nosec B108  # a mount point: each simulated host's namespace shadows it with a private folder
VAR_TMP = Path("/var/tmp")  # nosec B108  # as above

# Paths a host's mount namespace shadows, as (per-host dir name under fs/, mount point).
SHADOWED = (
    ("root", Path("/root")),
    ("tmp", TMP),
    ("var-tmp", VAR_TMP),
    ("bin", Path("/usr/local/bin")),
    ("dist-packages", HOST_DIST_PACKAGES),
    ("etc", HOST_ETC),
    ("var-log", Path("/var/log")),
)


@dataclass(frozen=True)
class HostPaths:
    """The files of one simulated host."""

    root: Path

    @property
    def ssh(self) -> Path:
        return self.root / "ssh"

    @property
    def host_key(self) -> Path:
        return self.ssh / "ssh_host_ed25519_key"

    @property
    def sshd_config(self) -> Path:
        return self.ssh / "sshd_config"

    @property
    def sshd_pid(self) -> Path:
        return self.ssh / "sshd.pid"

    @property
    def sshd_log(self) -> Path:
        return self.ssh / "sshd.log"

    @property
    def boot_script(self) -> Path:
        return self.root / "boot.sh"

    @property
    def services(self) -> Path:
        """Executables boot.sh starts on every boot, before sshd (a real host's enabled units)."""
        return self.root / "services"

    @property
    def spec(self) -> Path:
        return self.root / "spec.json"

    def fs(self, name: str) -> Path:
        return self.root / "fs" / name

    @property
    def etc(self) -> Path:
        return self.fs("etc")

    @property
    def host_config(self) -> Path:
        return self.etc / "host.json"

    @property
    def hw(self) -> Path:
        return self.root / "hw"

    @property
    def docker(self) -> Path:
        """The host's dockerd: its data root (the host's disk) and daemon.json (sim/dockerd.py)."""
        return self.root / "docker"

    @property
    def docker_config(self) -> Path:
        return self.docker / "daemon.json"

    @property
    def power(self) -> Path:
        return self.hw / "power"

    @property
    def state(self) -> Path:
        return self.hw / "state.json"

    @property
    def requests(self) -> Path:
        return self.hw / "requests"

    @property
    def boots(self) -> Path:
        return self.hw / "boots"

    def gpu_state(self, index: int = 0) -> Path:
        return self.hw / f"gpu{index}.json"


@dataclass(frozen=True)
class FleetPaths:
    """The files of one simulated fleet."""

    root: Path

    @property
    def manifest(self) -> Path:
        return self.root / "fleet.json"

    @property
    def key(self) -> Path:
        return self.root / "id_ed25519"

    @property
    def authorized_keys(self) -> Path:
        return self.root / "authorized_keys"

    @property
    def known_hosts(self) -> Path:
        return self.root / "known_hosts"

    @property
    def inventory(self) -> Path:
        return self.root / "inventory.yml"

    @property
    def hardware_events(self) -> Path:
        return self.root / "hardware.jsonl"

    @property
    def hardware_log(self) -> Path:
        return self.root / "hardware.log"

    @property
    def hardware_ready(self) -> Path:
        return self.root / "hardware.ready"

    def host(self, name: str) -> HostPaths:
        return HostPaths(self.root / "hosts" / name)


def registry_entry(run_id: str) -> Path:
    """/run/reprofleet-sim/<run>.json: who owns a run's kernel objects (for the stale sweep)."""
    return REGISTRY_DIR / f"{run_id}.json"


def shadowed_by_host(path: Path) -> Path | None:
    """The shadowed mount point that would hide ``path`` inside a host, if any."""
    resolved = path.resolve()
    for _, mount_point in SHADOWED:
        if resolved == mount_point or mount_point in resolved.parents:
            return mount_point
    return None
