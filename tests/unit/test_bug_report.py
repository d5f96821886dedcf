"""`invoke facts --bug-report` at the seam: a fake host shell answers each command, so what is
run (root or ``sudo -n``, bounded on the host and over SSH), what is fetched (size and sha256
of the bytes written), what a host without the script or without the right says, and that
the temporary folder always goes, are all decided without hosts."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from invoke import Program

from reprofleet.campaign import bug_report
from reprofleet.campaign.bug_report import BugReportStatus, collect_bug_reports, fetch_bug_report
from reprofleet.cli.tasks import ns
from reprofleet.errors import CommandTimedOut, ConnectError
from reprofleet.model import Host
from reprofleet.remote.transport import CommandResult

FOLDER = "/tmp/reprofleet-bug-report.Ab12Cd"
ARCHIVE = gzip.compress(b"Start of NVIDIA bug report log file.\n")


class FakeShell:
    """A host: its login, whether it has the script, and what running the script does."""

    def __init__(self, *, uid: int = 0, user: str = "root", script: str | None = "/usr/bin/nvidia-bug-report.sh",
                 on_run: Callable[[str], CommandResult] | None = None, writes: str = "nvidia-bug-report.log.gz") -> None:
        self.uid, self.user, self.script, self.writes = uid, user, script, writes
        self.on_run = on_run or (lambda command: CommandResult(command, 0, "complete.\n", ""))
        self.commands: list[tuple[str, float | None]] = []
        self.fetched: list[str] = []
        self.closed = False

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        self.commands.append((command, timeout))
        if command == bug_report.PROBE:
            return CommandResult(command, 0, f"{self.uid}\n{self.user}\n{self.script or ''}\n", "")
        if command.startswith("mktemp -d"):
            return CommandResult(command, 0, FOLDER + "\n", "")
        if command.startswith("ls -1"):
            return CommandResult(command, 0, self.writes + "\n", "")
        if command.startswith("rm -rf"):
            return CommandResult(command, 0, "", "")
        return self.on_run(command)

    def fetch_file(self, remote_path: str, local_path: Path, max_bytes: int) -> tuple[int, str]:
        self.fetched.append(remote_path)
        local_path.write_bytes(ARCHIVE)
        return len(ARCHIVE), hashlib.sha256(ARCHIVE).hexdigest()

    def close(self) -> None:
        self.closed = True

    def ran(self, prefix: str) -> list[tuple[str, float | None]]:
        return [(c, t) for c, t in self.commands if c.startswith(prefix)]


def test_a_root_login_runs_the_script_in_a_fresh_folder_bounded_and_fetches_its_archive(tmp_path: Path) -> None:
    shell = FakeShell()
    got = fetch_bug_report("ws01", shell, tmp_path / "out", timeout_s=90)
    assert got.status is BugReportStatus.FETCHED
    assert got.path == tmp_path / "out" / "ws01" / "nvidia-bug-report.log.gz" and got.path.read_bytes() == ARCHIVE
    assert (got.size, got.sha256) == (len(ARCHIVE), hashlib.sha256(ARCHIVE).hexdigest())
    [(command, ssh_timeout)] = shell.ran(f"cd {FOLDER}")
    assert command == f"cd {FOLDER} && timeout -k 10 90 /usr/bin/nvidia-bug-report.sh </dev/null"
    assert ssh_timeout == 90 + 10 + 30  # the host stops it first; SSH only if the host does not
    assert shell.fetched == [f"{FOLDER}/nvidia-bug-report.log.gz"]
    assert shell.commands[-1][0] == f"rm -rf {FOLDER}"
    assert got.line() == f"ws01: {got.path} ({len(ARCHIVE)} bytes, sha256 {got.sha256})"


def test_a_host_without_gzip_gives_the_plain_log(tmp_path: Path) -> None:
    got = fetch_bug_report("ws01", FakeShell(writes="nvidia-bug-report.log"), tmp_path)
    assert got.ok and got.path == tmp_path / "ws01" / "nvidia-bug-report.log"


def test_a_user_login_goes_through_sudo_n_and_a_refusal_prints_the_sudoers_line(tmp_path: Path) -> None:
    refused = FakeShell(uid=1000, user="lab", on_run=lambda c: CommandResult(c, 1, "", "sudo: a password is required\n"))
    got = fetch_bug_report("ws02", refused, tmp_path)
    [(command, _)] = refused.ran(f"cd {FOLDER}")
    assert "timeout -k 10 600 sudo -n /usr/bin/nvidia-bug-report.sh" in command
    assert got.status is BugReportStatus.FAILED and "lab may not run nvidia-bug-report.sh" in got.detail
    assert "`lab ALL=(root) NOPASSWD: /usr/bin/nvidia-bug-report.sh`" in got.fix
    assert refused.commands[-1][0] == f"rm -rf {FOLDER}" and not refused.fetched
    allowed = FakeShell(uid=1000, user="lab")
    assert fetch_bug_report("ws02", allowed, tmp_path).ok


def test_a_host_without_the_script_says_so_in_one_line_and_runs_nothing(tmp_path: Path) -> None:
    shell = FakeShell(script=None)
    got = fetch_bug_report("ws03", shell, tmp_path)
    assert got.status is BugReportStatus.ABSENT
    assert got.line() == ("ws03: absent: no nvidia-bug-report.sh on this host (it ships with the NVIDIA driver: "
                          "is the driver installed from NVIDIA's packages?)")
    assert [c for c, _ in shell.commands] == [bug_report.PROBE]


@pytest.mark.parametrize("exit_code", [124, 137])
def test_a_script_the_host_stopped_names_the_timeout_and_the_flag(tmp_path: Path, exit_code: int) -> None:
    shell = FakeShell(on_run=lambda c: CommandResult(c, exit_code, "", ""))
    got = fetch_bug_report("ws01", shell, tmp_path, timeout_s=5)
    assert got.status is BugReportStatus.FAILED and "did not finish within 5 s" in got.detail
    assert "--bug-report-timeout" in got.fix and shell.commands[-1][0] == f"rm -rf {FOLDER}"


def test_a_script_ssh_gave_up_on_is_a_failure_and_the_folder_still_goes(tmp_path: Path) -> None:
    def hangs(command: str) -> CommandResult:
        raise CommandTimedOut("ws01", command, 45.0)

    shell = FakeShell(on_run=hangs)
    got = fetch_bug_report("ws01", shell, tmp_path, timeout_s=5)
    assert got.status is BugReportStatus.FAILED and "the host did not stop it" in got.detail
    assert shell.commands[-1][0] == f"rm -rf {FOLDER}"


def test_a_script_that_fails_gives_its_last_words(tmp_path: Path) -> None:
    shell = FakeShell(on_run=lambda c: CommandResult(c, 2, "", "working...\nERROR: cannot write\n"))
    got = fetch_bug_report("ws01", shell, tmp_path)
    assert got.detail == "nvidia-bug-report.sh failed (exit status 2): ERROR: cannot write"


def _host(name: str) -> Host:
    return Host(name=name, address="10.0.0.1")


def test_one_host_that_cannot_be_reached_stops_none_of_the_others(tmp_path: Path) -> None:
    shells = {"ws01": FakeShell(), "ws03": FakeShell(script=None)}

    def connect(host: Host) -> Any:
        if host.name == "ws02":
            raise ConnectError("ws02", "no route to host")
        return shells[host.name]

    got = collect_bug_reports([_host("ws01"), _host("ws02"), _host("ws03")], connect, tmp_path)
    assert [(r.host, r.status) for r in got] == [("ws01", BugReportStatus.FETCHED), ("ws02", BugReportStatus.FAILED),
                                                  ("ws03", BugReportStatus.ABSENT)]
    assert "cannot be asked" in got[1].detail and all(shell.closed for shell in shells.values())


def _run(*argv: str) -> int:
    try:
        Program(namespace=ns, name="reprofleet", binary="reprofleet").run(["reprofleet", *argv])
    except SystemExit as done:
        return int(done.code or 0)
    return 0


def test_facts_bug_report_through_invokes_parser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    ws01:\n      ansible_host: 10.213.254.254\n"
                         "    ws02:\n      ansible_host: 10.213.254.253\n")
    shells = {"ws01": FakeShell(), "ws02": FakeShell(script=None)}
    asked: list[float] = []

    def collect(hosts: Any, connect: Any, into: Path, timeout_s: float) -> Any:
        asked.append(timeout_s)
        return [fetch_bug_report(h.name, shells[h.name], into, timeout_s) for h in hosts]

    monkeypatch.setattr(bug_report, "collect_bug_reports", collect)
    assert _run("facts", "-i", str(inventory), "--bug-report", "--into", str(tmp_path / "br"),
                "--bug-report-timeout", "45", "-j") == 3  # one host has no script: some hosts failed
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(d["host"], d["status"]) for d in lines] == [("ws01", "fetched"), ("ws02", "absent")]
    assert lines[0]["path"] == str(tmp_path / "br" / "ws01" / "nvidia-bug-report.log.gz") and asked == [45.0]
    assert _run("facts", "-i", str(inventory), "-l", "ws01", "--bug-report", "--into", str(tmp_path / "br")) == 0
    assert capsys.readouterr().out.startswith(f"ws01: {tmp_path / 'br' / 'ws01' / 'nvidia-bug-report.log.gz'} (")
    assert asked[-1] == bug_report.DEFAULT_TIMEOUT_S
    assert _run("facts", "-i", str(inventory), "--into", "x") == 2
    assert "go with --bug-report" in capsys.readouterr().err
    assert _run("facts", "-i", str(inventory), "--bug-report", "--bug-report-timeout", "soon") == 2


class _FakeSftp:
    def __init__(self, files: dict[str, bytes], claimed: dict[str, int] | None = None) -> None:
        self.files, self.claimed = files, claimed or {}

    def stat(self, path: str) -> Any:
        from types import SimpleNamespace

        if path not in self.files:
            raise FileNotFoundError(2, "No such file", path)
        return SimpleNamespace(st_size=self.claimed.get(path, len(self.files[path])))

    def open(self, path: str, mode: str) -> Any:
        import io

        return io.BytesIO(self.files[path])


def _session(files: dict[str, bytes], claimed: dict[str, int] | None = None) -> Any:
    from types import SimpleNamespace

    from reprofleet.remote.transport import Session

    session = object.__new__(Session)
    session.host = _host("ws01")
    session._connection = SimpleNamespace(sftp=lambda: _FakeSftp(files, claimed))  # type: ignore[attr-defined]
    return session


def test_fetch_file_copies_within_its_bound_and_never_leaves_a_partial_copy(tmp_path: Path) -> None:
    from reprofleet.remote.host_bytes import HostBytesError

    data = bytes(range(256)) * 1000
    target = tmp_path / "a.gz"
    assert _session({"/t/a.gz": data}).fetch_file("/t/a.gz", target, 1 << 20) == \
        (len(data), hashlib.sha256(data).hexdigest())
    assert target.read_bytes() == data
    with pytest.raises(HostBytesError, match="larger than 1000 bytes"):
        _session({"/t/b.gz": data}).fetch_file("/t/b.gz", tmp_path / "b.gz", 1000)
    with pytest.raises(HostBytesError, match="grew past 1000 bytes"):  # it said small, then sent more
        _session({"/t/c.gz": data}, {"/t/c.gz": 10}).fetch_file("/t/c.gz", tmp_path / "c.gz", 1000)
    with pytest.raises(ConnectError, match="download of /t/none failed"):
        _session({}).fetch_file("/t/none", tmp_path / "d.gz", 1000)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.gz"]
