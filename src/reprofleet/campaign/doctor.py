"""``invoke doctor``: before the first night, what each host needs for its plan, and the fix.

A campaign that starts on a host missing sudo rights, the container runtime or its image
burns its plan as ``infra``; one whose journal is volatile or whose login cannot read the
kernel's log loses the evidence a wedge leaves. The doctor asks every host once (its facts,
one ``docker image inspect`` per image, its power device's state), changes nothing, and says
per host and item: ``ok``, ``missing`` (the plan cannot run, or loses what it exists to
record: the exit status says not ready) or ``warn`` (it runs, with less evidence), each with
the line to fix it.

The decisions are :func:`diagnose` over the gathered evidence (:class:`Evidence`), so they
are tested without hosts; :func:`examine` gathers it over SSH and the power drivers. Hosts
that are Slurm nodes get the scheduler's items too (``doctor_slurm.py``).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from reprofleet.campaign.doctor_items import Check, Status
from reprofleet.campaign.doctor_power import recovery_checks
from reprofleet.campaign.preflight import chosen_hosts
from reprofleet.campaign.settings import ControllerConfig
from reprofleet.errors import ReprofleetError
from reprofleet.inventory import SLURM_VARIABLE
from reprofleet.remote import host_commands
from reprofleet.model import Cell, Host, RuntimeKind
from reprofleet.playbook import load_playbook
from reprofleet.power.plug_behaviour import PlugSettings
from reprofleet.runner import readiness

LOW_DISK_BYTES = 20 * 1024 ** 3  # an image pull, a venv and a few attempts' streams
SKEW_WARN_S = 2.0  # records from several hosts are lined up by their clocks


@dataclass(frozen=True)
class Evidence:
    """What :func:`examine` gathered for one host (or the error that stopped it)."""

    facts: Mapping[str, Any] | None
    login_error: str | None = None
    images: Mapping[str, str | None] = field(default_factory=dict)  # image tag -> its id here (None: absent)
    power: str | None = None  # the outlet's state as the device answered ("on", "off")
    power_error: str | None = None  # why the device did not answer; None with power None: no device
    asked_at: tuple[float, float] = (0.0, 0.0)  # the controller's clock before and after the facts
    plugs: tuple[tuple[str, PlugSettings | None], ...] = ()  # each power device's own settings, as it reported them
    plug_error: str | None = None  # why they could not be read


@dataclass(frozen=True)
class Diagnosis:
    host: str
    checks: tuple[Check, ...]

    @property
    def ready(self) -> bool:
        return not any(c.status is Status.MISSING for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "ready": self.ready, "checks": [c.to_json() for c in self.checks]}


def diagnose(host: Host, cells: Sequence[Cell], evidence: Evidence, *, root_features: Sequence[str] = (),
             campaign_s: float | None = None) -> Diagnosis:
    """Every item the plan of ``cells`` on ``host`` needs, judged from ``evidence``.

    ``root_features``: what the playbook turns on that needs a root login (host_debug sysctls,
    netconsole, pstore reads), named in the privilege item. ``campaign_s``: the campaign's
    expected length on the host, which an armed auto-off timer of its plug must exceed.
    """
    if evidence.facts is None:
        return Diagnosis(host.name, (Check("login", Status.MISSING, evidence.login_error or "no answer",
                                           _login_fix(host)),))
    facts = evidence.facts
    ready = facts.get("readiness") or {}
    checks = [Check("login", Status.OK, f"{ready.get('user') or host.user or '?'}@{host.address}:{host.port}")]
    checks.append(_privilege(host, facts, root_features))
    checks.append(_gpu(host, facts))
    if any(c.runtime.kind is RuntimeKind.DOCKER for c in cells):
        checks += _docker(facts, cells, evidence.images)
    checks += [_journal(facts), _kernel_log(host, ready), _pstore(ready), _lockups(facts)]
    if host.netconsole is not None:
        checks.append(_netconsole(ready))
    checks += [_power(host, evidence), _clock(ready, evidence.asked_at), _disk(ready)]
    checks += recovery_checks(host, cells, facts, (evidence.plugs, evidence.plug_error), campaign_s)
    return Diagnosis(host.name, tuple(checks))


def _login_fix(host: Host) -> str:
    who = f"{host.user + '@' if host.user else ''}{host.address}"
    return (f"check `ssh -p {host.port} {who} true` works without a password prompt (ssh-copy-id), and that the "
            "host key is in known_hosts (or --accept-new-host-keys once)")


# The only nvidia-smi arguments the campaign uses (collectors/policy_plan.py), as a sudoers
# regular expression; the README's line, checked with visudo and sudo -l (sudo 1.9.13).
SMI_ARGUMENTS = r"^-i [0-9]+ -(pm [01]|pl [0-9]+(\.[0-9]+)?|(lgc|lmc|ac) [0-9]+\,[0-9]+|rgc|rmc|rac)$"


def _privilege(host: Host, facts: Mapping[str, Any], root_features: Sequence[str]) -> Check:
    how, smi = facts.get("privilege"), facts.get("nvidia_smi") or "/usr/bin/nvidia-smi"
    user = (facts.get("readiness") or {}).get("user") or host.user or "USER"
    needs_root = f"; {', '.join(root_features)} need a root login (ansible_user: root)" if root_features else ""
    if how == "root":
        return Check("privilege", Status.OK, "root")
    if how == "sudo":
        return Check("privilege", Status.WARN if root_features else Status.OK,
                     f"sudo -n {smi} without a password{needs_root}",
                     "log in as root for those, or turn them off in the playbook" if root_features else "")
    return Check("privilege", Status.MISSING, f"no passwordless sudo for nvidia-smi: {user} may not run nvidia-smi's "
                                              f"setters{needs_root}",
                 f"add to sudoers (visudo -f /etc/sudoers.d/reprofleet): `{user} ALL=(root) NOPASSWD: {smi} "
                 f"{SMI_ARGUMENTS}` (sudo >= 1.9.10; never the bare path: `nvidia-smi -f FILE` writes any file "
                 "as root; README: What a host needs)")


def _gpu(host: Host, facts: Mapping[str, Any]) -> Check:
    problems = readiness._nvml(host, facts) + readiness._nvidia_smi(facts)
    problems = [p for p in problems if "setters need root" not in p]  # the privilege item says that
    if problems:
        return Check("GPU and driver", Status.MISSING, problems[0].split(":")[0], problems[0])
    gpus = {int(g["index"]): g for g in facts.get("gpus") or () if isinstance(g, Mapping) and "index" in g}
    gpu = gpus.get(host.gpu_index) or {}
    return Check("GPU and driver", Status.OK if gpu else Status.UNKNOWN,
                 f"GPU {host.gpu_index}: {gpu.get('name', '?')}, driver {facts.get('driver_version', '?')}, NVML "
                 f"{facts.get('nvml', '?')}")


def _docker(facts: Mapping[str, Any], cells: Sequence[Cell], images: Mapping[str, str | None]) -> list[Check]:
    problems = readiness._docker(facts)
    checks = [Check("docker", Status.MISSING, problems[0].split(":")[0], problems[0]) if problems
              else Check("docker", Status.OK, f"docker {facts.get('docker')}, runtimes "
                                              f"{', '.join(facts.get('docker_runtimes') or []) or '?'}")]
    for tag in sorted({str(c.runtime.image) for c in cells if c.runtime.kind is RuntimeKind.DOCKER and c.runtime.image}):
        found = images.get(tag)
        checks.append(Check(f"image {tag}", Status.OK if found else Status.WARN,
                            found[:19] if found else "not on the host (pulled before the first attempt: minutes)",
                            "" if found else f"docker pull {tag} (or let the campaign pull it)"))
    return checks


def _journal(facts: Mapping[str, Any]) -> Check:
    persistent = facts.get("journal_persistent")
    if persistent:
        return Check("journal", Status.OK, "persistent")
    if persistent is None:
        return Check("journal", Status.UNKNOWN, "could not tell")
    return Check("journal", Status.MISSING, "volatile: a power cycle erases the boot the wedge happened in",
                 "set `Storage=persistent` in /etc/systemd/journald.conf (or mkdir -p /var/log/journal), then "
                 "systemctl restart systemd-journald")


def _kernel_log(host: Host, ready: Mapping[str, Any]) -> Check:
    access = ready.get("kernel_log") or {}
    user = ready.get("user") or host.user or "USER"
    if access.get("journal") or access.get("kmsg"):
        return Check("kernel log", Status.OK, "readable by this login")
    if access.get("journal") is None and access.get("kmsg") is None:
        return Check("kernel log", Status.UNKNOWN, "could not tell")
    return Check("kernel log", Status.MISSING, f"{user} cannot read the kernel's messages (Xid lines)",
                 f"usermod -aG systemd-journal {user} (or adm on Ubuntu); /dev/kmsg is root-only there")


def _pstore(ready: Mapping[str, Any]) -> Check:
    store = ready.get("pstore") or {}
    if store.get("backend"):
        return Check("pstore", Status.OK, f"backend {store['backend']}" + ("" if store.get("mounted") else ", not mounted"))
    return Check("pstore", Status.WARN, "no pstore backend: a panic's backtrace does not survive the reboot",
                 "boot with efi_pstore (modprobe efi_pstore) or ramoops (ramoops.mem_address=...)")


def _lockups(facts: Mapping[str, Any]) -> Check:
    sysctls = facts.get("panic_sysctls") or {}
    absent = [name for name in sysctls.get("absent") or () if name in ("softlockup_panic", "hardlockup_panic",
                                                                        "nmi_watchdog")]
    if not sysctls:
        return Check("lockup detectors", Status.UNKNOWN, "could not tell")
    if absent:
        return Check("lockup detectors", Status.WARN, f"this kernel lacks {', '.join(absent)}",
                     "a kernel with CONFIG_SOFTLOCKUP_DETECTOR and CONFIG_HARDLOCKUP_DETECTOR (most distro kernels)")
    return Check("lockup detectors", Status.OK, "soft, hard and NMI watchdog present")


def _netconsole(ready: Mapping[str, Any]) -> Check:
    support = ready.get("netconsole") or {}
    if support.get("module") and support.get("configfs"):
        return Check("netconsole", Status.OK, "module and configfs present")
    missing = [what for what, ok in (("the netconsole module", support.get("module")),
                                     ("configfs", support.get("configfs"))) if not ok]
    return Check("netconsole", Status.MISSING, f"no {' and no '.join(missing)}: the inventory asks for netconsole",
                 "modprobe netconsole (install linux-modules-extra on Ubuntu); mount -t configfs none /sys/kernel/config")


def _power(host: Host, evidence: Evidence) -> Check:
    if not host.power_ports:
        return Check("power", Status.WARN, "no pdu: a wedge waits for a person to pull AC power",
                     "add a pdu: block (README, Power control)")
    if evidence.power_error:
        return Check("power", Status.MISSING, f"the power device does not answer: {evidence.power_error}",
                     "check its address, credentials and network; invoke power HOST status --hosts INVENTORY")
    if evidence.power == "off":
        return Check("power", Status.WARN, "the outlet reads off although the host answered",
                     "the pdu: block names the wrong outlet? invoke power HOST verify --hosts INVENTORY")
    return Check("power", Status.OK, f"{host.power_ports[0].driver} answers, outlet {evidence.power or '?'}")


def _clock(ready: Mapping[str, Any], asked_at: tuple[float, float]) -> Check:
    host_time = ready.get("time_unix")
    if not isinstance(host_time, (int, float)) or asked_at == (0.0, 0.0):
        return Check("clock", Status.UNKNOWN, "could not tell")
    before, after = asked_at
    skew = host_time - (before + after) / 2
    slack = (after - before) / 2
    if abs(skew) - slack > SKEW_WARN_S:
        return Check("clock", Status.WARN, f"{skew:+.1f} s from the controller's clock",
                     "enable time sync: systemctl enable --now systemd-timesyncd (or chrony)")
    return Check("clock", Status.OK, f"within {max(abs(skew), slack):.1f} s of the controller")


def _disk(ready: Mapping[str, Any]) -> Check:
    disk = ready.get("disk") or {}
    free = disk.get("free_bytes")
    if not isinstance(free, int):
        return Check("disk", Status.UNKNOWN, "could not tell")
    words = f"{free / 1024 ** 3:.1f} GiB free at {disk.get('path')}"
    if free < LOW_DISK_BYTES:
        return Check("disk", Status.WARN, words, f"free space there: an image, a venv and streams need ~{LOW_DISK_BYTES // 1024 ** 3} GiB")
    return Check("disk", Status.OK, words)


# -- gathering ------------------------------------------------------------------------------
@dataclass(frozen=True)
class DoctorRequest:
    """``invoke doctor``: the hosts, the campaign they must be ready for, and how to reach them."""

    inventory: str
    playbook: str
    config: ControllerConfig
    reports: Path  # the power locks' folder, as a campaign's
    limit: str | None = None  # an Ansible host pattern over the playbook's own
    accept_new: bool | None = None  # --accept-new-host-keys (None: the config's)


@dataclass(frozen=True)
class Checkup:
    """Every chosen host's diagnosis, for the playbook as its loader named it."""

    playbook: str
    found: tuple[Diagnosis, ...]


def checkup(request: DoctorRequest) -> Checkup:
    """Read the playbook and the inventory, ask every chosen host, and diagnose each."""
    book = load_playbook(request.playbook)
    _, inventory = chosen_hosts(book, request.inventory, request.limit)
    request.config.configure_power()
    cells = list(book.cells)
    evidence = examine(inventory.hosts, lambda host: cells, request.config.run_settings(request.accept_new),
                       request.reports)
    campaign_s = book.attempts * len(cells) * book.timeouts.attempt
    found = tuple(diagnose(h, cells, evidence[h.name], root_features=root_features(cells, h), campaign_s=campaign_s)
                  for h in inventory.hosts)
    if any(SLURM_VARIABLE in h.vars for h in inventory.hosts):  # -i slurm:...: what the scheduler must allow
        from reprofleet.scheduler import SlurmClient

        found = with_slurm(found, inventory.hosts, SlurmClient())
    return Checkup(book.path, found)


def with_slurm(found: Sequence[Diagnosis], hosts: Sequence[Host], client: Any) -> tuple[Diagnosis, ...]:
    """Each host's diagnosis with its Slurm items (doctor_slurm.py) added; Slurm asked once for all."""
    from reprofleet.campaign.doctor_slurm import gather, slurm_checks

    evidence = gather(client, hosts)
    by_name = {host.name: host for host in hosts}
    return tuple(Diagnosis(d.host, (*d.checks, *(Check(c.item, Status(c.status.value), c.found, c.fix)
                                                 for c in slurm_checks(by_name[d.host], evidence)))) for d in found)


def examine(hosts: Sequence[Host], cells_of: Callable[[Host], Sequence[Cell]], settings: Any,
            report_root: Path) -> dict[str, Evidence]:
    """Ask every host (concurrently) for what :func:`diagnose` judges; one failing host stops nothing."""
    from reprofleet.power.ports import build_host_power
    from reprofleet.power.locks import lock_folder
    from reprofleet.remote.session import with_agent

    try:
        powers = dict(build_host_power([h for h in hosts if h.power_ports], None, lock_dir=lock_folder(report_root)))
        power_problem = None
    except ReprofleetError as exc:  # a pdu block that cannot even be built (a missing secret)
        powers, power_problem = {}, str(exc)

    def one(host: Host) -> Evidence:
        images = sorted({str(c.runtime.image) for c in cells_of(host) if c.runtime.kind is RuntimeKind.DOCKER
                         and c.runtime.image})
        before = time.time()

        def ask(agent: Any) -> tuple[dict[str, Any], float, dict[str, str | None]]:
            facts = dict(agent.facts().as_json)
            after = time.time()
            found: dict[str, str | None] = {}
            if facts.get("docker"):
                for tag in images:
                    found[tag] = host_commands.run_command(agent, host_commands.image_id(tag))
            return facts, after, found

        answer = with_agent(host, settings.transport, ask)
        state, error = _power_state(host, powers, power_problem)
        if isinstance(answer, ReprofleetError):
            return Evidence(None, login_error=str(answer), power=state, power_error=error)
        facts, after, found = answer
        plugs, plug_error = read_plugs(powers.get(host.name)) if error is None else ((), None)
        return Evidence(facts, images=found, power=state, power_error=error, asked_at=(before, after),
                        plugs=plugs, plug_error=plug_error)

    with ThreadPoolExecutor(max_workers=max(1, min(16, len(hosts)))) as pool:
        return dict(zip((h.name for h in hosts), pool.map(one, hosts)))


def read_plugs(power: Any) -> tuple[tuple[tuple[str, PlugSettings | None], ...], str | None]:
    """Each power device's own settings (power/plug_behaviour.py), or why they could not be read."""
    if power is None:
        return (), None
    try:
        return tuple((driver.where, driver.plug_settings()) for driver in power.drivers), None
    except ReprofleetError as exc:
        return (), str(exc)


def _power_state(host: Host, powers: Mapping[str, Any], problem: str | None) -> tuple[str | None, str | None]:
    if not host.power_ports:
        return None, None
    power = powers.get(host.name)
    if power is None:
        return None, problem or "its power driver could not be built"
    states = []
    for driver in power.drivers:
        try:
            states.append(driver.status().value)
        except ReprofleetError as exc:
            return None, str(exc)
    return ("off" if "off" in states else states[0] if states else None), None


def root_features(cells: Sequence[Cell], host: Host) -> list[str]:
    """What the plan's cells or the inventory turn on for ``host`` that needs a root login."""
    found = []
    if any(not cell.host_debug.is_default for cell in cells):
        found.append("host_debug's lockup-to-panic sysctls")
    if host.netconsole is not None:
        found.append("netconsole")
    return found
