"""What a simulated host's file system is made of, and the script that boots it.

The fake tools (``nvidia-smi``, ``journalctl``, ``nvidia-bug-report.sh``, ``sudo``
for a host whose login is not root) and the fake Python modules
(``pynvml``, ``vllm``, and the ``rfsim`` package they share) are package data under
``sim/hostfs/`` and ``sim/rfsim/``; they are copied into each host's own tree, so a host's
tools can be changed or removed without touching the others. ``docker`` is the real client,
through a wrapper at the host's own daemon (sim/dockerd.py), and NVIDIA's container runtime
and hook are the simulator's (rfsim/nvidia_runtime.py).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Sequence

from reprofleet.sim import dockerd
from reprofleet.sim.layout import HOST_ETC, SHADOWED, TMP, VAR_TMP, HostPaths

LOGIN_UID = 4242  # a non-root login's uid and gid (SimHostSpec.login_user): its own, in the host's /etc/passwd
LOGIN_HOME = Path("/home")  # shadowed by the host's own folder, only on a host whose login is not root

SIM_DIR = Path(__file__).resolve().parent
HOSTFS = SIM_DIR / "hostfs"
RFSIM = SIM_DIR / "rfsim"
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")

def install_tools(bin_dir: Path, dist_packages: Path) -> None:
    """Copy the fake tools and modules into a host's /usr/local/bin and dist-packages."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool in (HOSTFS / "bin").iterdir():
        target = bin_dir / tool.name
        shutil.copyfile(tool, target)
        target.chmod(0o755)
    shutil.copytree(HOSTFS / "dist-packages", dist_packages, ignore=IGNORE, dirs_exist_ok=True)
    shutil.copytree(RFSIM, dist_packages / "rfsim", ignore=IGNORE, dirs_exist_ok=True)


def make_host_tree(paths: HostPaths, journal_persistent: bool, login_user: str = "root",
                   authorized_keys: Path | None = None, netns_name: str | None = None,
                   nvidia_toolkit: bool = True) -> None:
    """Create the per-host directories that boot.sh bind-mounts over the shadowed paths
    (``netns_name``: the host's netns, whose real dockerd its ``docker`` talks to; None: a tree
    without docker, as a unit test's)."""
    for name, _ in SHADOWED:
        paths.fs(name).mkdir(parents=True, exist_ok=True)
    paths.fs("root").chmod(0o700)
    for name in ("tmp", "var-tmp"):
        paths.fs(name).chmod(0o1777)
    (paths.etc / "hw").mkdir(exist_ok=True)  # mount point for the hw dir
    if journal_persistent:
        (paths.fs("var-log") / "journal").mkdir(exist_ok=True)
    for folder in (paths.ssh, paths.hw, paths.requests, paths.boots, paths.hw / "pstore", paths.services):
        folder.mkdir(parents=True, exist_ok=True)
    install_tools(paths.fs("bin"), paths.fs("dist-packages"))
    if netns_name is not None:  # its dockerd: the data root, daemon.json, and its docker at that daemon
        dockerd.prepare(paths, netns_name, nvidia_toolkit)
        wrapper = paths.fs("bin") / "docker"
        wrapper.write_text(dockerd.client_wrapper_text(netns_name))
        wrapper.chmod(0o755)
    if login_user != "root":
        _make_login(paths, login_user, authorized_keys)


def _make_login(paths: HostPaths, user: str, authorized_keys: Path | None) -> None:
    """A user of this host's own: /etc/passwd and /etc/group are the machine's plus one line
    each (bind-mounted over them inside the host only), a home under the host's /home, and the
    fleet key readable where sshd, as that user, can reach it."""
    for name, line in (("passwd", f"{user}:x:{LOGIN_UID}:{LOGIN_UID}:reprofleet sim login:{LOGIN_HOME / user}:/bin/bash"),
                       ("group", f"{user}:x:{LOGIN_UID}:")):
        kept = [row for row in Path("/etc", name).read_text().splitlines() if not row.startswith(f"{user}:")]
        (paths.root / "fs" / name).write_text("\n".join([*kept, line, ""]))
    home = paths.fs("home") / user
    home.mkdir(parents=True, exist_ok=True)
    os.chown(home, LOGIN_UID, LOGIN_UID)
    home.chmod(0o755)
    if authorized_keys is not None:
        shutil.copyfile(authorized_keys, paths.etc / "authorized_keys")
        (paths.etc / "authorized_keys").chmod(0o644)


def sshd_config_text(paths: HostPaths, address: str, authorized_keys: Path, login_user: str = "root") -> str:
    """A real host's sshd, reduced to what the controller needs: root (or the host's own
    login) by the fleet key."""
    keys = f"{authorized_keys}" if login_user == "root" else f"{authorized_keys} {HOST_ETC / 'authorized_keys'}"
    return "\n".join(
        [
            f"ListenAddress {address}:22",
            f"HostKey {paths.host_key}",
            f"PidFile {paths.sshd_pid}",
            f"AuthorizedKeysFile {keys}",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            "UseDNS no",
            "MaxStartups 100",
            "MaxSessions 50",
            "PrintMotd no",
            "PrintLastLog no",
            "X11Forwarding no",
            "AcceptEnv LANG LC_*",
            # the host's sysctls (host_debug), configfs (netconsole), sysfs (its PCI bus, watchdog:
            # rfsim/sysfs.py) and systemd's state (an orderly reboot: rfsim/orderly_shutdown.py);
            # sshd takes one SetEnv line only
            f"SetEnv REPROFLEET_PROC_SYS={HOST_ETC / 'hw' / 'proc-sys'} "
            f"REPROFLEET_CONFIGFS={HOST_ETC / 'hw' / 'configfs'} REPROFLEET_SYSFS={HOST_ETC / 'hw' / 'sys'} "
            f"REPROFLEET_SYSTEM_STATE={HOST_ETC / 'hw' / 'system_state'} "
            f"REPROFLEET_CRASH_DIR={HOST_ETC / 'hw' / 'crash'}",
            "Subsystem sftp internal-sftp",
            "LogLevel INFO",
            "",
        ]
    )


def boot_services(paths: HostPaths, name: str, dist_packages: Path, login_user: str = "root") -> list[str]:
    """The services a host starts at boot, in the background, before it becomes sshd: one
    entry a service (its boot.sh lines), so that adding one is adding an entry. ``name`` is
    the host's kernel-object name (its netns and cgroup)."""
    services = [
        dockerd.boot_lines(paths, name, name, dist_packages, login_user),
    ]
    return [line for service in services for line in service]


def boot_script_text(paths: HostPaths, hostname: str, dist_packages: Path, login_user: str = "root",
                     services: Sequence[str] = ()) -> str:
    """Power on, seen from inside: mount the host's own view of the world, start its boot
    services (``services``: boot.sh lines, from :func:`boot_services`), become sshd.

    Runs under ``ip netns exec <ns> unshare --mount --uts`` (private propagation, so nothing
    leaks into the root namespace); $1 is this boot's boot_id file, $2 its kernel log.
    Every ``exec`` keeps the PID, so the process the daemon started *is* sshd.
    """
    mounts = {
        "root": Path("/root"),
        "tmp": TMP,
        "var-tmp": VAR_TMP,
        "bin": Path("/usr/local/bin"),
        "dist-packages": dist_packages,
        "etc": HOST_ETC,
        "var-log": Path("/var/log"),
    }
    lines = [
        "#!/bin/sh",
        f"# Boot of simulated host {hostname} (generated by reprofleet.sim; do not edit).",
        "set -eu",
        f"hostname {hostname}",
    ]
    lines += [f"mount --bind {paths.fs(name)} {target}" for name, target in mounts.items()]
    lines += [
        f"mount --bind {paths.hw} {HOST_ETC / 'hw'}",
        'mount --bind "$1" /proc/sys/kernel/random/boot_id',
        "mount -o remount,bind,ro /proc/sys/kernel/random/boot_id",
        'mount --bind "$2" /dev/kmsg',
        f"mount --bind {paths.hw / 'pstore'} /sys/fs/pstore",  # what a panic left (ramoops)
        *(_login_lines(paths, dist_packages) if login_user != "root" else []),
        *services,  # the daemons every host has (dockerd), from boot_services()
        *_service_lines(paths),  # and those a fixture adds under <host>/services/ (slurmd)
        "mkdir -p /run/sshd",  # sshd's privilege separation dir (systemd's RuntimeDirectory)
        "cd /root",
        f"exec /usr/sbin/sshd -D -e -f {paths.sshd_config}",
        "",
    ]
    return "\n".join(lines)


def _service_lines(paths: HostPaths) -> list[str]:
    """The host's boot services (``<host>/services/*``, read at each boot, so a service added
    after the fleet was built starts with the next boot): each in the background, in this
    boot's namespaces and the host's cgroup, so it freezes with the host and dies with its power."""
    return [
        f'for service in {paths.services}/*; do',
        '  [ -x "$service" ] && "$service" </dev/null >>/var/log/boot-services.log 2>&1 &',
        "done",
    ]


def _login_lines(paths: HostPaths, dist_packages: Path) -> list[str]:
    """A non-root login's users and home, and the root broker its ``sudo`` asks (rfsim/sudo.py)."""
    return [
        f"mount --bind {paths.root / 'fs' / 'passwd'} /etc/passwd",
        f"mount --bind {paths.root / 'fs' / 'group'} /etc/group",
        f"mkdir -p {LOGIN_HOME}",
        f"mount --bind {paths.fs('home')} {LOGIN_HOME}",
        f"PYTHONPATH={dist_packages} /usr/bin/python3 -m rfsim.sudo_broker </dev/null >>/var/log/sudo-broker.log 2>&1 &",
    ]
