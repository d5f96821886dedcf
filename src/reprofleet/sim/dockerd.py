"""A real docker daemon on every simulated host: Debian's ``dockerd``, one per host.

It is a boot service of the host (hostfs.boot_services): ``boot.sh`` starts it in the
background inside the host's namespaces (its network namespace, its mount namespace) and in
its freezer cgroup, before it becomes sshd, so it dies with the "machine" on a power cut or a
reset and starts again on the next boot. What makes it the host's own:

* ``--data-root <host>/docker/data``: the host's disk (images and stopped containers survive
  a reboot), a tmpfs of the machine's (no disk writes for the images every host loads);
* ``--exec-root /run/reprofleet-sim/dockerd/<netns>``: its /run, emptied at every boot as a
  tmpfs would be (a short path: unix sockets live under it);
* ``-H unix:///run/reprofleet-sim/dockerd/<netns>.sock``: the host's ``docker`` (a wrapper
  first on its PATH, /usr/local/bin/docker) talks to this socket and no other; a login that is
  not root reaches it through its group (``--group``), as a member of ``docker`` would;
* ``--cgroup-parent /<host cgroup>/docker``: every container's cgroup is a child of the host's
  freezer cgroup, so a wedge (FROZEN) freezes its containers too, and the power cut that kills
  the host's cgroup kills them (cgroup.FreezerGroup walks the whole tree);
* ``--iptables=false --bridge=none``: no NAT rules or bridge of its own in the host's network
  namespace (the wedge's iptables DROP stays the only rule);
* the host's /etc/resolv.conf names a resolver that does not answer: the fleet is offline, and
  a pull fails at once with docker's words for it;
* ``--config-file <host>/docker/daemon.json``: the ``nvidia`` runtime (sim/rfsim/nvidia_runtime.py)
  as the default, so ``--gpus`` reaches the simulated GPU's files as NVIDIA's toolkit mounts a driver;
* ``--containerd=<its socket>``: containerd runs as a service of its own, as Debian's
  containerd.service does (:func:`containerd_config`), not as dockerd's child.

``boot.sh`` runs under ``ip netns exec``, which mounts a fresh /sys for the network
namespace: the cgroup v1 hierarchies are mounted again there (the same hierarchies: cgroup v1
has one per controller set) so that dockerd and runc find them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Sequence

from reprofleet.sim.layout import REGISTRY_DIR, HostPaths
from reprofleet.sim.procs import SimError, run

DOCKERD = Path("/usr/sbin/dockerd")
CLIENT = Path("/usr/bin/docker")
EXEC_ROOTS = REGISTRY_DIR / "dockerd"
CGROUP_ROOT = Path("/sys/fs/cgroup")
ETC_DOCKER = Path("/etc/docker")
SERVICE_PATH = "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # the toolkit's hook is looked up here
READY_TIMEOUT_S = 30.0
# The fleet is offline: no resolver answers, so a pull fails at once ("connection refused")
# with docker's own words, not after 20 s of timeouts towards the machine's resolver.
RESOLV_CONF = "# simulated host (reprofleet.sim): an offline lab, no resolver answers\nnameserver 127.0.0.1\n"
DATA_SOURCE = "rfsim-docker"  # the data roots' tmpfs mounts are named rfsim-docker-<netns>
DATA_ROOT_SIZE = "1g"
APT_PACKAGE = "docker.io"
TOOLKIT = ("nvidia-container-runtime", "nvidia-container-runtime-hook")  # in the host's /usr/local/bin


def exec_root(netns_name: str) -> Path:
    return EXEC_ROOTS / netns_name


def socket_path(netns_name: str) -> Path:
    """Beside the exec root, not in it: dockerd makes its exec root 0700, and a login that is not
    root reaches the socket through its group."""
    return EXEC_ROOTS / f"{netns_name}.sock"


def client_argv(netns_name: str) -> list[str]:
    """The docker client, from the machine's root namespace, talking to one host's daemon."""
    return [str(CLIENT), "-H", f"unix://{socket_path(netns_name)}"]


def daemon_config(toolkit: bool = True) -> dict[str, object]:
    """daemon.json: the ``nvidia`` runtime, and it as the default (``nvidia-ctk runtime
    configure --set-as-default`` writes the same), so ``--gpus`` works without ``--runtime``;
    nothing on a host without NVIDIA's toolkit."""
    if not toolkit:
        return {}
    return {
        "runtimes": {"nvidia": {"path": "/usr/local/bin/nvidia-container-runtime", "runtimeArgs": []}},
        "default-runtime": "nvidia",
    }


def cgroup_mounts() -> list[tuple[str, str]]:
    """(mount point, options) of every cgroup v1 hierarchy of this machine, as /proc/mounts has them."""
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "cgroup" and fields[1].startswith(f"{CGROUP_ROOT}/"):
            controllers = [o for o in fields[3].split(",") if o not in ("rw", "ro", "relatime", "nosuid", "nodev",
                                                                        "noexec", "clone_children")]
            found.append((fields[1], ",".join(controllers)))
    return found


def prepare(paths: HostPaths, netns_name: str, toolkit: bool = True) -> None:
    """At fleet setup: the host's docker folder, daemon.json, and its data root: a tmpfs mounted
    in the machine's namespace, so it outlives the host's reboots as a disk does, while the
    host's containers and tearing the fleet down write and delete nothing on the real disk."""
    data = paths.docker / "data"
    data.mkdir(parents=True, exist_ok=True)
    paths.docker_config.write_text(json.dumps(daemon_config(toolkit), indent=2, sort_keys=True) + "\n")
    (paths.docker / "containerd.toml").write_text(containerd_config(paths, netns_name))
    (paths.docker / "etc").mkdir(mode=0o755, exist_ok=True)
    if not toolkit:  # neither the runtime nor the hook that docker's --gpus looks for
        for tool in TOOLKIT:
            (paths.fs("bin") / tool).unlink(missing_ok=True)
    (paths.docker / "resolv.conf").write_text(RESOLV_CONF)
    if not _mounted(data):
        run(["mount", "-t", "tmpfs", "-o", f"mode=0711,size={DATA_ROOT_SIZE}", f"{DATA_SOURCE}-{netns_name}", str(data)])


def unmount_data(fleet_dir: Path) -> None:
    """Unmount every host data root of a fleet (after its processes are gone)."""
    for mount_point in _mounts_under(fleet_dir):
        run(["umount", "--lazy", mount_point], check=False)


def _mounted(path: Path) -> bool:
    return str(path) in _mounts_under(path)


def _mounts_under(folder: Path) -> list[str]:
    prefix = str(folder)
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[0].startswith(DATA_SOURCE) and (fields[1] == prefix
                                                                        or fields[1].startswith(prefix + "/")):
            found.append(fields[1])
    return sorted(found, reverse=True)


def containerd_config(paths: HostPaths, netns_name: str) -> str:
    """The host's /etc/containerd/config.toml: Debian's containerd.service runs ``containerd``
    on its own, and docker.service hands dockerd its socket (``--containerd``). Its root is on
    the host's docker disk (the data root's tmpfs), its state and socket under the exec root.

    One setting is not containerd's default: its metadata garbage collector's
    ``pause_threshold`` (docs/garbage-collection.md: 0.02). With it, the scheduler wakes again
    after 49 times its average collection, about every 15 ms on a store this small, even
    when it has nothing to collect: 0.6 % of a core for every idle host (measured: 1.9 s of CPU
    in 30 s for 5 hosts), harmless on one real host, not for the fleet tests' 25 at once on 2
    cores. At 0 it checks once a second; what it collects, and when a deletion makes it
    collect, stay as they were."""
    root = exec_root(netns_name)
    return "\n".join([
        "# a simulated host's containerd (reprofleet.sim): Debian's containerd.service, its own config",
        "version = 2",
        f'root = "{paths.docker / "data" / "containerd" / "daemon"}"',
        f'state = "{root / "containerd" / "daemon"}"',
        # Debian's config.toml keeps Kubernetes' CRI on (with CNI dirs no host here has); docker never
        # uses it, and dockerd's own containerd turns it off
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
        "",
        "[grpc]",
        f'  address = "{containerd_socket(netns_name)}"',
        "",
        '[plugins."io.containerd.internal.v1.opt"]  # Debian moves it off /opt, under containerd\'s root',
        f'  path = "{paths.docker / "data" / "containerd" / "opt"}"',
        "",
        '[plugins."io.containerd.gc.v1.scheduler"]',
        "  pause_threshold = 0.0",
        "",
    ])


def containerd_socket(netns_name: str) -> Path:
    return exec_root(netns_name) / "containerd" / "containerd.sock"


def boot_lines(paths: HostPaths, netns_name: str, cgroup: str, dist_packages: Path,
               login_user: str = "root") -> list[str]:
    """What boot.sh runs for this host's docker, as Debian's three units do: containerd
    (containerd.service, a session of its own), the docker socket (docker.socket, in
    sockets.target: rfsim/docker_socket.py), then dockerd beside sshd, handed the socket and
    pointed at containerd (docker.service, ``-H fd:// --containerd=...``; it waits for
    containerd's socket); sshd does not wait for either, and a ``docker`` command that comes
    first waits in the socket's backlog. Their logs: the host's /var/log/containerd.log and
    /var/log/dockerd.log. A login that is not root may use docker as a member of the ``docker``
    group would: the socket's group is the login's own."""
    root = exec_root(netns_name)
    group = login_user if login_user != "root" else "''"
    lines = [f"mount --bind {paths.docker / 'resolv.conf'} /etc/resolv.conf",
             # its own /etc/docker: dockerd keeps its identity there (key.json, `docker info`'s ID)
             f"mkdir -p {ETC_DOCKER}", f"mount --bind {paths.docker / 'etc'} {ETC_DOCKER}",
             f"mount -t tmpfs -o mode=755 cgroup {CGROUP_ROOT}"]
    for mount_point, options in cgroup_mounts():
        lines += [f"mkdir -p {mount_point}", f"mount -t cgroup -o {options} cgroup {mount_point}"]
    lines += [
        f"rm -rf {root} {socket_path(netns_name)}",  # /run is a tmpfs: nothing of the last boot's daemon is left
        f"mkdir -p {root}",
        f"PATH={SERVICE_PATH} setsid -f containerd --config {paths.docker / 'containerd.toml'} "
        "</dev/null >>/var/log/containerd.log 2>&1",
        # a service in a session of its own, not a child of the process that becomes sshd (a
        # dropped SSH session must not take it down); the hardware daemon, the hosts' subreaper, is its init
        f"PATH={SERVICE_PATH} PYTHONPATH={dist_packages} /usr/bin/python3 -m rfsim.docker_socket "
        f"{socket_path(netns_name)} {group} -- {DOCKERD} --data-root {paths.docker / 'data'} --exec-root {root} "
        f"--pidfile {root / 'dockerd.pid'} -H fd:// --containerd={containerd_socket(netns_name)} "
        f"--config-file {paths.docker_config} --iptables=false --ip-masq=false --bridge=none "
        f"--userland-proxy=false --cgroup-parent /{cgroup}/docker --log-level warn "
        "</dev/null >>/var/log/dockerd.log 2>&1",
    ]
    return lines


def client_wrapper_text(netns_name: str) -> str:
    """The host's ``docker``: the real client, always at this host's daemon."""
    return "\n".join([
        "#!/bin/sh",
        "# docker on a simulated host (reprofleet.sim): the real client, at this host's own dockerd.",
        f"DOCKER_HOST=unix://{socket_path(netns_name)}",
        "export DOCKER_HOST",
        f'exec {CLIENT} "$@"',
        "",
    ])


def answers(netns_name: str, timeout_s: float = 5.0) -> bool:
    """Whether the host's daemon answers ``docker version`` now."""
    return client_answers(client_argv(netns_name), timeout_s)


def client_answers(client: Sequence[str], timeout_s: float = 5.0) -> bool:
    """Whether the daemon that ``client`` (a docker argv) talks to answers ``docker version`` now."""
    try:
        done = subprocess.run([*client, "version", "--format", "{{.Server.Version}}"],
                              capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def wait_ready(netns_name: str, timeout_s: float = READY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if socket_path(netns_name).exists() and answers(netns_name, max(0.5, deadline - time.monotonic())):
            return
        time.sleep(0.1)
    raise SimError(f"dockerd of {netns_name} did not answer on {socket_path(netns_name)} within {timeout_s:g}s")


def remove_exec_root(netns_name: str) -> None:
    shutil.rmtree(exec_root(netns_name), ignore_errors=True)
    socket_path(netns_name).unlink(missing_ok=True)


def missing_tools() -> Sequence[str]:
    return [str(p) for p in (DOCKERD, CLIENT) if not p.exists()]
