"""`invoke facts --bug-report`: each host's ``nvidia-bug-report.sh`` archive, fetched to the controller.

NVIDIA's bug template asks for it: "run nvidia-bug-report.sh, and attach the resulting
nvidia-bug-report.log.gz" (NVIDIA/open-gpu-kernel-modules, .github/ISSUE_TEMPLATE/bug_report.md).
The script ships with the driver (Debian: /usr/lib/nvidia/current/nvidia-bug-report.sh in
nvidia-driver-bin), refuses to run unless root ("ERROR: Please run nvidia-bug-report.sh as
root."), writes ``nvidia-bug-report.log.gz`` into the folder it is run from (gzip -c; plain
``nvidia-bug-report.log`` where gzip is missing) and may take minutes.

So, per host, in one SSH session: find the script (PATH, the sbin folders and Debian's
folder); run it in a fresh temporary folder the way the agent runs nvidia-smi's setters, as
the root login or through ``sudo -n`` (never a prompt: a login without the right fails at
once, and the sudoers line to add is printed); bounded on both ends (``timeout`` on the host,
a little more on the SSH command); fetch the archive into ``INTO/<host>/`` with its size and
sha256; remove the folder whatever happened. A host without the script says so in one line,
and every host's failure is data: the others go on.

The steps are :func:`fetch_bug_report` over a :class:`HostShell` (a Session, or a test's
fake), so every decision is tested without hosts; the commands themselves live in
``remote/bug_report_commands.py``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum, unique
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from reprofleet.campaign.facts import FactsRequest
from reprofleet.campaign.settings import seconds
from reprofleet.errors import CommandTimedOut, ReprofleetError
from reprofleet.model import Host, file_name
from reprofleet.records.private_files import make_folder
from reprofleet.remote.bug_report_commands import (KILL_AFTER_S, MAKE_FOLDER, PROBE, SCRIPT, Probe, list_folder,
                                                   parse_probe, remove_folder, run_script)
from reprofleet.remote.transport import CommandResult, connect

ARCHIVES = ("nvidia-bug-report.log.gz", "nvidia-bug-report.log")  # gzip present, gzip missing
DEFAULT_TIMEOUT_S = 600.0  # the script can take minutes (it runs nvidia-smi -q, lspci -vvv, journalctl ...)
SSH_SLACK_S = 30.0  # the SSH command outlives the host's own `timeout` by this much (and its kill)
MAX_ARCHIVE_BYTES = 1 << 30  # a real archive is a few MB; a GPU dump makes it tens
SUDO_REFUSED = ("a password is required", "a terminal is required", "not in the sudoers", "may not run sudo",
                "not allowed to execute")


class HostShell(Protocol):
    """What fetching needs of a host: short commands, and one file copied back."""

    def run(self, command: str, timeout: float | None = None) -> CommandResult: ...

    def fetch_file(self, remote_path: str, local_path: Path, max_bytes: int) -> tuple[int, str]: ...


@unique
class BugReportStatus(str, Enum):
    FETCHED = "fetched"
    ABSENT = "absent"  # no nvidia-bug-report.sh on the host
    FAILED = "failed"  # it could not be run, did not finish, or its archive could not be fetched


@dataclass(frozen=True)
class BugReport:
    """One host's outcome: the archive where it now lies, or why there is none."""

    host: str
    status: BugReportStatus
    detail: str = ""
    path: Path | None = None
    size: int = 0
    sha256: str = ""
    fix: str = ""

    @property
    def ok(self) -> bool:
        return self.status is BugReportStatus.FETCHED

    def line(self) -> str:
        if self.ok:
            return f"{self.host}: {self.path} ({self.size} bytes, sha256 {self.sha256})"
        fix = f"; fix: {self.fix}" if self.fix else ""
        return f"{self.host}: {self.status.value}: {self.detail}{fix}"

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "status": self.status.value, "path": str(self.path) if self.path else None,
                "size": self.size, "sha256": self.sha256 or None, "detail": self.detail, "fix": self.fix}


def sudoers_line(probe: Probe) -> str:
    return f"add to sudoers (visudo -f /etc/sudoers.d/reprofleet): `{probe.user} ALL=(root) NOPASSWD: {probe.script}`"


def _last_words(done: CommandResult) -> str:
    text = (done.stderr.strip() or done.stdout.strip()).splitlines()
    return text[-1][:300] if text else f"exit status {done.exit_code}"


def _run_failure(host: str, done: CommandResult, probe: Probe, timeout_s: float) -> BugReport:
    words = f"{done.stderr}\n{done.stdout}".lower()
    if not probe.root and any(refusal in words for refusal in SUDO_REFUSED):
        return BugReport(host, BugReportStatus.FAILED, f"{probe.user} may not run {SCRIPT} through `sudo -n` "
                         "(it needs root)", fix=sudoers_line(probe))
    if not probe.root and done.exit_code == 127 and "sudo" in words:
        return BugReport(host, BugReportStatus.FAILED, f"{probe.user} is not root and the host has no sudo",
                         fix=f"log in as root (ansible_user: root), or install sudo and {sudoers_line(probe)}")
    if done.exit_code in (124, 137):  # timeout(1): TERM sent (124), or KILL after -k (137)
        return BugReport(host, BugReportStatus.FAILED, f"{SCRIPT} did not finish within {timeout_s:g} s (stopped)",
                         fix="give it longer: --bug-report-timeout SECONDS")
    return BugReport(host, BugReportStatus.FAILED, f"{SCRIPT} failed (exit status {done.exit_code}): "
                     f"{_last_words(done)}")


def fetch_bug_report(host: str, shell: HostShell, into: Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> BugReport:
    """Run the script on one host and fetch its archive into ``into/<host>/``; failures are returned."""
    probe = parse_probe(shell.run(PROBE, timeout=30).stdout)
    if probe.script is None:
        return BugReport(host, BugReportStatus.ABSENT, f"no {SCRIPT} on this host (it ships with the NVIDIA "
                         "driver: is the driver installed from NVIDIA's packages?)")
    made = shell.run(MAKE_FOLDER, timeout=30)
    folder = made.stdout.strip()
    if not made.ok or not folder.startswith("/"):
        return BugReport(host, BugReportStatus.FAILED, f"could not make a temporary folder: {_last_words(made)}")
    try:
        return _run_and_fetch(host, shell, probe, folder, into, timeout_s)
    finally:
        _remove(shell, folder)


def _remove(shell: HostShell, folder: str) -> None:
    """The temporary folder goes whatever happened; a host gone by now keeps it (in its /tmp)."""
    try:
        shell.run(remove_folder(folder), timeout=30)
    except ReprofleetError:
        pass


def _run_and_fetch(host: str, shell: HostShell, probe: Probe, folder: str, into: Path, timeout_s: float) -> BugReport:
    try:
        done = shell.run(run_script(folder, probe, timeout_s), timeout=timeout_s + KILL_AFTER_S + SSH_SLACK_S)
    except CommandTimedOut:
        return BugReport(host, BugReportStatus.FAILED, f"{SCRIPT} did not finish within {timeout_s:g} s and "
                         "the host did not stop it", fix="give it longer: --bug-report-timeout SECONDS")
    if not done.ok:
        return _run_failure(host, done, probe, timeout_s)
    listed = shell.run(list_folder(folder), timeout=30).stdout.split()
    archive = next((name for name in ARCHIVES if name in listed), None)
    if archive is None:
        return BugReport(host, BugReportStatus.FAILED, f"{SCRIPT} ended but wrote none of {', '.join(ARCHIVES)}")
    target_dir = make_folder(into / file_name(host, what="host name"))  # private: a host's logs and config
    target = target_dir / archive
    size, digest = shell.fetch_file(f"{folder}/{archive}", target, MAX_ARCHIVE_BYTES)
    return BugReport(host, BugReportStatus.FETCHED, path=target, size=size, sha256=digest)


Connect = Callable[[Host], Any]


def collect_bug_reports(hosts: Sequence[Host], connect: Connect, into: Path,
                        timeout_s: float = DEFAULT_TIMEOUT_S) -> list[BugReport]:
    """Every host at once (a script of minutes each); one host's failure stops nothing."""

    def one(host: Host) -> BugReport:
        try:
            session = connect(host)
        except ReprofleetError as exc:
            return BugReport(host.name, BugReportStatus.FAILED, f"cannot be asked: {exc}")
        try:
            return fetch_bug_report(host.name, session, into, timeout_s)
        except ReprofleetError as exc:
            return BugReport(host.name, BugReportStatus.FAILED, str(exc))
        finally:
            session.close()

    with ThreadPoolExecutor(max_workers=max(1, min(16, len(hosts)))) as pool:
        return list(pool.map(one, hosts))


def fleet_bug_reports(request: FactsRequest, into: Path, timeout: str = "") -> list[BugReport]:
    """``invoke facts --bug-report``: every chosen host's archive into ``into``; ``timeout``: the
    seconds the script may run, as typed (empty: :data:`DEFAULT_TIMEOUT_S`), read once the
    inventory was."""
    hosts = request.hosts()
    timeout_s = seconds("bug-report-timeout", timeout) if timeout else DEFAULT_TIMEOUT_S
    transport = request.config.run_settings(request.accept_new).transport
    return collect_bug_reports(hosts, lambda host: connect(host, transport), into, timeout_s)
