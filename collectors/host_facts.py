"""`facts`: what a host is, read from the files the kernel and the distro already keep.

Each fact is read on its own and a failure leaves that fact null with a note, so one
unreadable file never hides the rest. Parsers are pure functions over file text.
"""

from __future__ import annotations

import glob
import json
import os
import platform
import shutil
import socket
import subprocess
from typing import Any, Callable, Dict, List, Optional

import attempt_state as state
import nvml_facts
import readiness_facts
import self_reset
import kdump_facts

DMI_DIR = "/sys/class/dmi/id"
DMI_FIELDS = ("sys_vendor", "product_name", "board_vendor", "board_name", "bios_vendor",
              "bios_version", "bios_date")
JOURNALD_CONF = "/etc/systemd/journald.conf"
JOURNALD_DROPIN_DIRS = ("/usr/lib/systemd/journald.conf.d", "/run/systemd/journald.conf.d",
                        "/etc/systemd/journald.conf.d")
DOCKER_TIMEOUT_S = 5.0


def parse_os_release(text: str) -> Dict[str, Optional[str]]:
    values: Dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and not key.startswith("#"):
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            values[key] = value
    return {"id": values.get("ID"), "version_id": values.get("VERSION_ID"),
            "pretty_name": values.get("PRETTY_NAME")}


def parse_cpuinfo(text: str, logical: Optional[int]) -> Dict[str, Any]:
    """Model, physical cores (distinct physical id/core id pairs) and threads."""
    model: Optional[str] = None
    cores = set()
    processors = 0
    physical = core = ""
    for line in text.splitlines() + [""]:
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "processor":
            processors += 1
        elif key in ("model name", "Model", "cpu model") and model is None:
            model = value
        elif key == "physical id":
            physical = value
        elif key == "core id":
            core = value
        elif not key and (physical or core):
            cores.add((physical, core))
            physical = core = ""
    threads = logical or processors or None
    return {"model": model, "cores": len(cores) or threads, "threads": threads}


def parse_meminfo_total(text: str) -> Optional[int]:
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            return int(parts[1]) * 1024 if len(parts) >= 2 and parts[1].isdigit() else None
    return None


def journald_storage(texts: List[str]) -> str:
    """The effective ``Storage=`` of journald config texts, in precedence order."""
    storage = "auto"
    for text in texts:
        section = ""
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1]
            elif section == "Journal" and line.startswith("Storage="):
                storage = line.split("=", 1)[1].strip().lower() or "auto"
    return storage


def journal_persistent(storage: str, journal_dir_exists: bool) -> bool:
    """Does the journal survive a reboot? (What `journalctl -b -1` needs.)"""
    if storage == "persistent":
        return True
    if storage in ("volatile", "none"):
        return False
    return journal_dir_exists


def _read(path: str) -> str:
    with open(path, errors="replace") as handle:
        return handle.read()


def journald_texts() -> List[str]:
    """Main file, then drop-ins sorted by file name; /etc masks /run masks /usr/lib."""
    dropins: Dict[str, str] = {}
    for directory in JOURNALD_DROPIN_DIRS:
        for path in glob.glob(os.path.join(directory, "*.conf")):
            dropins[os.path.basename(path)] = path
    paths = [JOURNALD_CONF] + [dropins[name] for name in sorted(dropins)]
    return [_read(path) for path in paths if os.path.isfile(path)]


def _docker_says(*args: str) -> Optional[str]:
    """``docker ARGS``' stdout when it answered with status 0, else None (missing, no daemon)."""
    docker = shutil.which("docker")
    if docker is None:
        return None
    try:
        result = subprocess.run([docker, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, timeout=DOCKER_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.decode("utf-8", "replace").strip() if result.returncode == 0 else None


def docker_version() -> Optional[str]:
    return _docker_says("version", "--format", "{{.Server.Version}}") or None


def docker_runtimes() -> Optional[List[str]]:
    """The runtimes the docker daemon knows (``nvidia`` once the NVIDIA Container Toolkit is
    configured for it); None when docker is missing or its daemon does not answer."""
    text = _docker_says("info", "--format", "{{json .Runtimes}}")
    try:
        runtimes = json.loads(text) if text else None
    except ValueError:
        return None
    return sorted(str(name) for name in runtimes) if isinstance(runtimes, dict) else None


PROBE_ARGS = ("-i", "0", "-rgc")  # a reset every policy restore runs (collectors/policy_plan.py)


def privilege(nvidia_smi: Optional[str]) -> str:
    """How the agent may run nvidia-smi's setters: ``root``, ``sudo`` (``sudo -n`` allows it
    without a password) or ``none`` (policy cells cannot run here)."""
    if os.geteuid() == 0:
        return "root"
    sudo = shutil.which("sudo")
    if sudo is None:
        return "none"
    # one command line the campaign runs, as it runs it: a sudoers rule that allows only the
    # campaign's arguments (README) lists this, while the bare path would match nothing
    argv = [sudo, "-n", "-l", nvidia_smi, *PROBE_ARGS] if nvidia_smi else [sudo, "-n", "true"]
    try:
        result = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, timeout=DOCKER_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return "none"
    return "sudo" if result.returncode == 0 else "none"


def _dmi() -> Dict[str, Optional[str]]:
    values: Dict[str, Optional[str]] = {}
    for name in DMI_FIELDS:
        try:
            values[name] = _read(os.path.join(DMI_DIR, name)).strip() or None
        except OSError:
            values[name] = None
    return values


def collect() -> Dict[str, Any]:
    """The `facts` line: every field of PROTOCOL.md, null where unreadable (see notes)."""
    notes: List[str] = []
    uname = os.uname()

    def fact(name: str, read: Callable[[], Any]) -> Any:
        try:
            return read()
        except Exception as exc:  # one unreadable fact must not hide the others
            notes.append("%s: %s: %s" % (name, type(exc).__name__, exc))
            return None

    facts: Dict[str, Any] = {"k": "facts"}
    facts["hostname"] = fact("hostname", socket.gethostname)
    facts["boot_id"] = state.read_boot_id()
    facts["uptime_s"] = fact("uptime_s", lambda: float(_read("/proc/uptime").split()[0]))
    facts["os"] = fact("os", lambda: parse_os_release(_read("/etc/os-release")))
    facts["kernel"] = uname.release
    facts["arch"] = uname.machine
    facts["cpu"] = fact("cpu", lambda: parse_cpuinfo(_read("/proc/cpuinfo"), os.cpu_count()))
    facts["memory_bytes"] = fact("memory_bytes", lambda: parse_meminfo_total(_read("/proc/meminfo")))
    facts["dmi"] = _dmi()
    facts["python"] = platform.python_version()
    facts["journal_persistent"] = fact("journal_persistent", lambda: journal_persistent(
        journald_storage(journald_texts()), os.path.isdir("/var/log/journal")))
    facts["docker"] = fact("docker", docker_version)
    facts["docker_runtimes"] = fact("docker_runtimes", docker_runtimes) if facts["docker"] else None
    facts["nvidia_smi"] = shutil.which("nvidia-smi")
    facts["privilege"] = fact("privilege", lambda: privilege(facts["nvidia_smi"]))
    facts.update(nvml_facts.collect(notes))
    facts.update(fact("self_reset", lambda: self_reset.collect(notes))
                 or {"watchdog": None, "panic_sysctls": None, "kdump_loaded": None})
    facts.update(fact("kdump", lambda: kdump_facts.collect(notes)) or {"kdump": None})
    facts["readiness"] = readiness_facts.collect(notes)  # what invoke doctor judges beyond the above
    facts["notes"] = notes
    return facts
