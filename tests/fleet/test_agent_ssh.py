"""The agent over a real OpenSSH session on loopback: an attempt outlives its SSH session.

Fleet-marked (needs root and /usr/sbin/sshd). One sshd per module, on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

from tests.support import agent_harness as h

pytestmark = pytest.mark.fleet
SSHD = "/usr/sbin/sshd"
REMOTE_PYTHON = "/usr/bin/python3"
TWENTY_LINES = "for i in $(seq 1 20); do echo n$i; sleep 0.1; done"


class LoopbackSsh:
    def __init__(self, root: Path, port: int) -> None:
        self.root, self.port = root, port
        self.key = root / "client_ed25519"

    def argv(self, *remote: str) -> List[str]:
        return ["ssh", "-p", str(self.port), "-i", str(self.key), "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={self.root / 'known_hosts'}",
                "-o", "ConnectTimeout=5", "root@127.0.0.1", " ".join(shlex.quote(arg) for arg in remote)]

    def agent(self, state_dir: Path, *args: str) -> List[str]:
        return self.argv(REMOTE_PYTHON, str(h.AGENT), "--state-dir", str(state_dir), *args)


@pytest.fixture(scope="module")
def loopback_ssh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackSsh]:
    if os.geteuid() != 0 or not Path(SSHD).exists() or shutil.which("ssh") is None:
        pytest.skip("needs root, /usr/sbin/sshd and ssh")
    root = tmp_path_factory.mktemp("sshd")
    # sshd's privilege-separation dir; left in place (other sshds on this machine use it)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    for name in ("host_ed25519", "client_ed25519"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / name)], check=True)
    (root / "authorized_keys").write_text((root / "client_ed25519.pub").read_text())
    port = _free_port()
    (root / "known_hosts").write_text(f"[127.0.0.1]:{port} {(root / 'host_ed25519.pub').read_text()}")
    (root / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_ed25519'}\n"
        f"PidFile {root / 'sshd.pid'}\nAuthorizedKeysFile {root / 'authorized_keys'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "UsePAM no\nStrictModes no\nUseDNS no\nMaxStartups 50\n")
    sshd = subprocess.Popen([SSHD, "-D", "-e", "-f", str(root / "sshd_config")],
                            stdout=subprocess.DEVNULL, stderr=open(root / "sshd.log", "wb"))
    try:
        _wait_for_banner(port, deadline_s=10)
        yield LoopbackSsh(root, port)
    finally:
        sshd.terminate()
        sshd.wait(timeout=10)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_banner(port: int, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                if sock.recv(4).startswith(b"SSH-"):
                    return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"sshd did not answer on port {port} within {deadline_s}s")


def _stream_until(proc: subprocess.Popen[bytes], wanted: str) -> List[Dict[str, Any]]:
    assert proc.stdout is not None
    lines: List[Dict[str, Any]] = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        raw = proc.stdout.readline()
        assert raw, f"stream ended before {wanted!r}"
        lines.append(json.loads(raw))
        if lines[-1]["k"] == "log" and lines[-1]["line"] == wanted:
            return lines
    raise AssertionError(f"no {wanted!r} in 15s")


def _remote_run_pids(attempt_id: str) -> List[int]:
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"run" in argv and attempt_id.encode() in argv and any(a.endswith(b"agent.py") for a in argv):
            pids.append(int(cmdline.parent.name))
    return pids


def _wait_until(condition: Callable[[], bool], what: str, deadline_s: float = 10.0) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"waited {deadline_s}s for {what}")


def test_an_attempt_survives_its_ssh_session_dropping_and_attach_resumes(
        loopback_ssh: LoopbackSsh, tmp_path: Path) -> None:
    run = subprocess.Popen(loopback_ssh.agent(tmp_path, "run", "--id", "ssh1", "--timeout", "30",
                                              "--hb", "0.2", "--", "sh", "-c", TWENTY_LINES),
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    seen = _stream_until(run, "n3")
    run.kill()  # the controller's side of the connection is gone
    run.communicate(timeout=10)
    _wait_until(lambda: not _remote_run_pids("ssh1"), "the host-side `run` to notice and exit")
    received = h.without_hb(seen)
    result = subprocess.run(loopback_ssh.agent(tmp_path, "attach", "--id", "ssh1", "--from",
                                               str(received[-1]["seq"] + 1)),
                            stdout=subprocess.PIPE, timeout=30)
    combined = received + h.without_hb(h.parse_lines(result.stdout.decode()))
    assert [e["line"] for e in combined if e["k"] == "log"] == [f"n{i}" for i in range(1, 21)]
    assert combined == h.stored_events(tmp_path, "ssh1")
    assert combined[-1]["k"] == "exit" and combined[-1]["rc"] == 0


def test_the_ssh_session_closes_when_the_agent_dies_while_the_poc_runs_on(
        loopback_ssh: LoopbackSsh, tmp_path: Path) -> None:
    """If a detached process kept the session's pipes, ssh would wait for the PoC."""
    run = subprocess.Popen(loopback_ssh.agent(tmp_path, "run", "--id", "ssh2", "--timeout", "30",
                                              "--", "sh", "-c", TWENTY_LINES),
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    _stream_until(run, "n2")
    for pid in _remote_run_pids("ssh2"):
        os.kill(pid, signal.SIGKILL)  # the host-side `run` dies; its session must end
    run.communicate(timeout=10)
    assert not (tmp_path / "attempts/ssh2/exit.json").exists(), "ssh waited for the PoC"
    result = subprocess.run(loopback_ssh.agent(tmp_path, "attach", "--id", "ssh2", "--from", "0"),
                            stdout=subprocess.PIPE, timeout=30)
    assert h.parse_lines(result.stdout.decode())[-1]["rc"] == 0
