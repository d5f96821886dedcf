"""One remote command over the system ``ssh`` binary, for bulk bytes (cache pushes).

Why not paramiko here: measured on the simulated fleet (bench/push.py, 1 GiB to 4 hosts),
the same object stream took 42.1 s through a paramiko exec channel and 26.5 s through
OpenSSH's ``ssh`` (``rsync -a``: 25.9 s): paramiko frames and windows every 32 KiB packet in
Python. Control traffic stays on paramiko (transport.py); this is only a pipe. Same key,
same known_hosts file, strict host-key checking, never a password prompt.

Inventory values are data, never options: ``--`` ends the options before the login (an
address or user starting with ``-`` can then never become ``-oProxyCommand=...``), and
agent forwarding, port forwardings and local commands are off whatever ``~/.ssh/config``
says (on the command line the first value of an option wins), so a PoC on the host can
never reach the controller's ssh-agent or a forwarded port.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from reprofleet.credentials import child_environment
from reprofleet.errors import ConnectError
from reprofleet.model import Host
from reprofleet.remote import host_bytes


NO_FORWARDING = ("-o", "ForwardAgent=no", "-o", "ClearAllForwardings=yes", "-o", "PermitLocalCommand=no")


@dataclass(frozen=True)
class SshTarget:
    """How ``ssh`` reaches one host, as the inventory and the campaign's transport say."""

    host: Host
    known_hosts: Path
    connect_timeout: float = 10.0

    def argv(self, command: str) -> list[str]:
        options = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
                   "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
                   "-o", f"ConnectTimeout={max(1, int(self.connect_timeout))}", "-o", "ServerAliveInterval=5",
                   "-o", "ServerAliveCountMax=3", "-o", "ControlMaster=no", "-o", "ControlPath=none",
                   *NO_FORWARDING, "-p", str(self.host.port)]
        if self.host.key_file:
            options += ["-i", str(Path(self.host.key_file).expanduser()), "-o", "IdentitiesOnly=yes"]
        login = f"{self.host.user}@{self.host.address}" if self.host.user else self.host.address
        return ["ssh", *options, "--", login, command]


def available() -> bool:
    return shutil.which("ssh") is not None


class SshExec:
    """A remote command's stdin (bytes in) and, once done, its stdout and stderr; the same
    interface as transport.ExecChannel, so a push can go over either."""

    def __init__(self, target: SshTarget, command: str) -> None:
        self._host = target.host.name
        try:
            self._proc = subprocess.Popen(target.argv(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, env=child_environment())
        except OSError as exc:
            raise ConnectError(self._host, f"cannot start ssh: {exc}") from exc
        self.stdout: IO[bytes] | None = self._proc.stdout

    def write(self, data: bytes) -> None:
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write(data)
        except (BrokenPipeError, OSError) as exc:
            if self._proc.poll() is None:
                self._proc.kill()  # dead first: what is left to read is a pipe's buffer, never a host's stream
            _, err = self._proc.communicate(timeout=30)
            raise ConnectError(self._host, f"the transfer broke: {exc}: {err.decode('utf-8', 'replace').strip()}") \
                from exc

    def finish(self, timeout: float) -> tuple[int, bytes, bytes]:
        """Close stdin, wait; (exit status, stdout, stderr). 255 is ssh's own failure. Each
        of stdout and stderr is read to its end with host_bytes' bound (communicate() would
        keep whatever the host prints); past it, ssh is killed and HostBytesError raised."""
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        except OSError:
            pass
        got: dict[str, bytes | host_bytes.HostBytesError] = {}
        readers = [threading.Thread(target=self._drain, args=(name, stream, got), daemon=True)
                   for name, stream in (("stdout", self._proc.stdout), ("stderr", self._proc.stderr))]
        for reader in readers:
            reader.start()
        deadline = time.monotonic() + timeout
        for reader in readers:
            reader.join(max(0.0, deadline - time.monotonic()))
        if any(reader.is_alive() for reader in readers):
            self.close()
            raise ConnectError(self._host, f"the transfer did not finish within {timeout:g} s")
        for value in got.values():
            if isinstance(value, host_bytes.HostBytesError):
                self.close()
                raise value
        out, err = got["stdout"], got["stderr"]
        assert isinstance(out, bytes) and isinstance(err, bytes)
        try:
            status = self._proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired as exc:
            self.close()
            raise ConnectError(self._host, f"the transfer did not finish within {timeout:g} s") from exc
        if status == 255:
            raise ConnectError(self._host, f"ssh failed: {err.decode('utf-8', 'replace').strip()}")
        return status, out, err

    def _drain(self, name: str, stream: IO[bytes] | None, got: dict[str, bytes | host_bytes.HostBytesError]) -> None:
        try:
            got[name] = host_bytes.read_to_eof(self._host, stream, name) if stream is not None else b""
        except host_bytes.HostBytesError as exc:
            got[name] = exc
            if self._proc.poll() is None:
                self._proc.kill()
        except (OSError, ValueError):
            got[name] = b""

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
