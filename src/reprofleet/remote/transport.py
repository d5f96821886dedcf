"""SSH to one host: the only module that touches Fabric and paramiko.

Why so much care: measured on real sshd hosts, Fabric's defaults never notice a frozen
host, and paramiko's ``set_keepalive`` sends requests that want no reply, so it notices
nothing either. Here every open connection has a liveness monitor that sends an SSH global
request *with want-reply* every ``liveness_interval`` seconds and records when the last
reply came; callers read :meth:`Session.silent_for` and decide. Host keys are checked
strictly against a known_hosts file; accepting a new key is an explicit opt-in. Every
SSH or socket failure leaves this module as one :class:`~reprofleet.errors.ConnectError`
naming the host.

Fabric reads ``~/.ssh/config``, which may say ``ForwardAgent yes`` or ``ProxyJump``; a PoC
on the host must never reach the controller's ssh-agent, so forwarding is off whatever the
file says, and a jump host Fabric builds from it (with paramiko's ``AutoAddPolicy``, which
accepts any key) gets the same known_hosts and the same strict policy as the host itself.
"""

from __future__ import annotations

import codecs
import fcntl
import io
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import invoke
import paramiko
from fabric import Config, Connection
from fabric.runners import Remote

from reprofleet.config import DEFAULT_TIMINGS
from reprofleet.errors import CommandTimedOut, ConnectError, HostKeyError
from reprofleet.model import Host
from reprofleet.records.private_files import create_new_fd
from reprofleet.remote import host_bytes

_KEEPALIVE_REQUEST = "keepalive@openssh.com"  # OpenSSH answers it (with a failure: still a reply)


@dataclass(frozen=True)
class TransportSettings:
    """Timeouts and host-key policy for every connection a campaign opens."""

    known_hosts: Path
    accept_new_host_keys: bool = False
    connect_timeout: float = DEFAULT_TIMINGS.connect_timeout_s
    banner_timeout: float = DEFAULT_TIMINGS.ssh_banner_timeout_s
    auth_timeout: float = DEFAULT_TIMINGS.auth_timeout_s
    command_timeout: float = DEFAULT_TIMINGS.command_timeout_s
    liveness_interval: float = DEFAULT_TIMINGS.liveness_interval_s
    # A connection whose server has not answered for this long is closed, which unblocks
    # every call waiting on it (paramiko's channel opens have no timeout of their own).
    dead_after: float = DEFAULT_TIMINGS.dead_after_s


@dataclass(frozen=True)
class CommandResult:
    """What a short remote command returned."""

    command: str
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def json_lines(self, host: str, what: str) -> list[dict]:
        """Each stdout line parsed as one JSON object (the host agent's output format),
        bounded and checked in host_bytes; anything else is a HostBytesError naming ``host``."""
        return host_bytes.json_lines(host, self.stdout, what)


_KNOWN_HOSTS_LOCK = threading.Lock()  # threads of this process; flock serialises other processes


def append_known_host(known_hosts: Path, hostname: str, key: paramiko.PKey) -> bool:
    """Add one line for ``hostname`` to the user's known_hosts, under a lock; never rewrite it.

    paramiko's ``save_host_keys`` rewrites the whole file from one thread's view: comments,
    ``@cert-authority``/``@revoked`` lines and keys other threads just added are lost.
    Returns False when the same key was already there.
    """
    line = f"{hostname} {key.get_name()} {key.get_base64()}"
    known_hosts.parent.mkdir(parents=True, exist_ok=True)
    with _KNOWN_HOSTS_LOCK, open(known_hosts, "a+", encoding="utf-8") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            handle.seek(0)
            existing = handle.read()
            if line in existing.splitlines():
                return False
            if existing and not existing.endswith("\n"):
                handle.write("\n")
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())
            return True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def load_known_hosts(keys: paramiko.HostKeys, known_hosts: Path) -> set[str]:
    """Read a user's known_hosts into ``keys``; return the revoked keys (base64).

    paramiko's own loader stops at the first ``@cert-authority`` line; OpenSSH files have
    them. Marker lines are skipped here (a ``@revoked`` key is remembered and refused), and
    a line paramiko cannot read is skipped, not fatal.
    """
    revoked: set[str] = set()
    if not known_hosts.exists():
        return revoked
    for number, line in enumerate(known_hosts.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if fields[0].startswith("@"):
            if fields[0] == "@revoked" and len(fields) >= 4:
                revoked.add(fields[3])
            continue
        try:
            entry = paramiko.hostkeys.HostKeyEntry.from_line(line, number)
        except (paramiko.SSHException, paramiko.hostkeys.InvalidHostKey, ValueError):
            continue
        if entry is not None:
            for name in entry.hostnames:
                keys.add(name, entry.key.get_name(), entry.key)
    return revoked


class UnknownHostKey(paramiko.SSHException):
    """The host offered a key known_hosts does not hold, and new keys are not accepted."""


class RevokedHostKey(paramiko.SSHException):
    """The host offered a key known_hosts marks ``@revoked``."""


class _RejectPolicy(paramiko.MissingHostKeyPolicy):
    """paramiko's RejectPolicy, raising a type of ours: ``connect`` decides on it, not on its words."""

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        raise UnknownHostKey(f"Server {hostname!r} not found in known_hosts")


class _AcceptNewPolicy(paramiko.MissingHostKeyPolicy):
    """Record a host key we have never seen (like OpenSSH's StrictHostKeyChecking=accept-new).

    Only an *unknown* host reaches this policy: a known host whose key changed raises
    BadHostKeyException before it, and is refused; so is a key marked ``@revoked``.
    """

    def __init__(self, known_hosts: Path, revoked: frozenset[str] = frozenset()) -> None:
        self._known_hosts = known_hosts
        self._revoked = revoked

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        if key.get_base64() in self._revoked:
            raise RevokedHostKey(f"the host key of {hostname} is marked @revoked in known_hosts")
        client.get_host_keys().add(hostname, key.get_name(), key)
        append_known_host(self._known_hosts, hostname, key)


class _LivenessMonitor(threading.Thread):
    """Asks the server for a reply every interval; remembers when the last one came."""

    def __init__(self, transport: paramiko.Transport, interval: float) -> None:
        super().__init__(daemon=True, name="ssh-liveness")
        self._transport = transport
        self._interval = interval
        self._stop = threading.Event()
        self.last_reply = time.monotonic()

    def run(self) -> None:
        while not self._stop.is_set() and self._transport.is_active():
            sent = time.monotonic()
            try:
                self._transport.global_request(_KEEPALIVE_REQUEST, wait=True)
            except Exception:  # the transport died under us; the session notices on its own
                return
            if self._transport.is_active():
                self.last_reply = time.monotonic()
            self._stop.wait(max(0.0, self._interval - (time.monotonic() - sent)))

    def stop(self) -> None:
        self._stop.set()


class _Reaper(threading.Thread):
    """Closes a connection whose server stopped answering liveness requests."""

    def __init__(self, transport: paramiko.Transport, monitor: _LivenessMonitor, dead_after: float) -> None:
        super().__init__(daemon=True, name="ssh-reaper")
        self._transport = transport
        self._monitor = monitor
        self._dead_after = dead_after
        self._stop = threading.Event()

    def run(self) -> None:
        while not self._stop.wait(0.5) and self._transport.is_active():
            if time.monotonic() - self._monitor.last_reply > self._dead_after:
                self._transport.close()
                return

    def stop(self) -> None:
        self._stop.set()


class LineStream:
    """Lines of one remote command's stdout as they arrive, with a read timeout.

    ``next_line(timeout)`` returns a line, ``None`` when nothing came in time, and raises
    ConnectError when the channel closed without an exit status (the connection died).
    ``finished`` becomes true once the command exited and every line was read. A line is
    bounded and strict UTF-8 (host_bytes.LineBuffer): a host that never sends a newline is
    refused with HostBytesError, not buffered.
    """

    def __init__(self, session: "Session", channel: paramiko.Channel) -> None:
        self._session = session
        self._channel = channel
        self._buffer = host_bytes.LineBuffer(session.host.name, "stream")
        self.stderr_tail = b""
        self.exit_code: int | None = None

    @property
    def finished(self) -> bool:
        return self.exit_code is not None and not self._buffer.has_line()

    def next_line(self, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        while not self._buffer.has_line():
            if self._channel.exit_status_ready() and not self._channel.recv_ready():
                self._finish()
                return self._buffer.pop_rest()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if not self._read_chunk(min(remaining, 0.2)):
                continue
        return self._buffer.pop_line()

    def _read_chunk(self, timeout: float) -> bool:
        while self._channel.recv_stderr_ready():  # drained so it never blocks the remote side
            self.stderr_tail = (self.stderr_tail + self._channel.recv_stderr(65536))[-8192:]
        self._channel.settimeout(timeout)
        try:
            chunk = self._channel.recv(65536)
        except socket.timeout:
            return False
        except (OSError, paramiko.SSHException) as exc:
            raise ConnectError(self._session.host.name, f"stream broke: {exc}") from exc
        if not chunk:
            if not self._channel.exit_status_ready():
                raise ConnectError(self._session.host.name, "stream closed without an exit status")
            return False
        self._buffer.feed(chunk)
        return True

    def _finish(self) -> None:
        self.exit_code = self._channel.recv_exit_status()

    def close(self) -> None:
        try:
            self._channel.close()
        except Exception:
            pass


class _BoundedRemote(Remote):
    """Fabric's runner keeping at most host_bytes.MAX_REPLY_BYTES (+ one chunk) of a
    command's stdout and stderr: a host that prints a gigabyte costs the controller a
    bounded buffer (the rest is read and dropped until the command's timeout), and
    Session.run refuses the reply. Fabric's own keeps everything, and re-joins it all on
    every chunk for its watchers (we use none). It also decodes each stream as one text:
    Invoke decodes every chunk on its own, so a character whose bytes straddle two reads
    (a tqdm bar's "█" in a log read back) became two U+FFFD."""

    def read_proc_output(self, reader: Callable[[int], bytes | None]) -> Iterator[str]:
        decoder = codecs.getincrementaldecoder(self.encoding)("replace")
        while True:
            data = reader(self.read_chunk_size)
            if not data:
                break
            text = decoder.decode(data)
            if text:
                yield text
        tail = decoder.decode(b"", final=True)  # bytes cut off by the end of the stream: U+FFFD, as before
        if tail:
            yield tail

    def _handle_output(self, buffer_: list[str], hide: bool, output: object,
                       reader: Callable[[int], bytes | None]) -> None:
        kept = 0
        for data in self.read_proc_output(reader):
            if not hide:
                self.write_our_output(stream=output, string=data)
            if kept <= host_bytes.MAX_REPLY_BYTES:
                buffer_.append(data)
                kept += len(data)


class ExecChannel:
    """A remote command's stdin to write bytes into and stdout to read bytes from; every
    failure is a ConnectError naming the host."""

    def __init__(self, host: str, channel: paramiko.Channel) -> None:
        self._host = host
        self._channel = channel
        self.stdout = channel.makefile("rb")

    def write(self, data: bytes) -> None:
        try:
            self._channel.sendall(data)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise ConnectError(self._host, f"the transfer broke: {exc}") from exc

    def finish(self, timeout: float) -> tuple[int, bytes, bytes]:
        """Close stdin, read the rest of stdout; (exit status, stdout, stderr)."""
        try:
            self._channel.shutdown_write()
            self._channel.settimeout(timeout)
            out = host_bytes.read_to_eof(self._host, self.stdout, "stdout")
            err = host_bytes.read_to_eof(self._host, self._channel.makefile_stderr("rb"), "stderr")
            return self._channel.recv_exit_status(), out, err
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise ConnectError(self._host, f"the transfer broke: {exc}") from exc
        finally:
            self._channel.close()

    def close(self) -> None:
        self._channel.close()


class Session:
    """One open SSH connection to one host."""

    def __init__(self, host: Host, connection: Connection, settings: TransportSettings) -> None:
        self.host = host
        self._connection = connection
        self._settings = settings
        transport = connection.client.get_transport()
        if transport is None:
            raise ConnectError(host.name, "no SSH transport after connect")
        self._transport = transport
        self._monitor = _LivenessMonitor(transport, settings.liveness_interval)
        self._monitor.start()
        self._reaper = _Reaper(transport, self._monitor, settings.dead_after)
        self._reaper.start()

    @property
    def alive(self) -> bool:
        """Open, and the server answered a liveness request within the last few intervals."""
        return self._transport.is_active() and self.silent_for() < 3 * self._settings.liveness_interval + 1

    def silent_for(self) -> float:
        """Seconds since the server last answered a liveness request."""
        return time.monotonic() - self._monitor.last_reply

    def run(self, command: str, timeout: float | None = None, stdin: str | None = None) -> CommandResult:
        """Run a short command and return its output; never raises on a non-zero exit."""
        limit = timeout if timeout is not None else self._settings.command_timeout
        try:
            result = self._connection.run(
                command,
                hide=True,
                warn=True,
                timeout=limit,
                in_stream=io.StringIO(stdin) if stdin is not None else False,
            )
        except invoke.exceptions.CommandTimedOut as exc:
            raise CommandTimedOut(self.host.name, command, limit) from exc
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise ConnectError(self.host.name, f"command failed to run: {exc}") from exc
        for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
            if len(text) > host_bytes.MAX_REPLY_BYTES:
                raise host_bytes.HostBytesError(self.host.name, f"{command.split()[0]!r}: {name} of more than "
                                                f"{host_bytes.MAX_REPLY_BYTES} bytes")
        return CommandResult(command, result.exited, result.stdout, result.stderr)

    def stream(self, command: str, stdin: bytes | None = None) -> LineStream:
        """Start a long-running command and read its stdout line by line; ``stdin``, when given,
        is written to it and its stdin closed (secrets travel this way, never in ``command``)."""
        try:
            channel = self._transport.open_session(timeout=self._settings.connect_timeout)
            channel.set_combine_stderr(False)
            channel.exec_command(command)  # nosec B601  # running a host command is this method's job; quoting the values in it is the callers' (issue 20, item 7)
            if stdin is not None:
                channel.sendall(stdin)
                channel.shutdown_write()
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise ConnectError(self.host.name, f"could not start a stream: {exc}") from exc
        return LineStream(self, channel)

    def exec_channel(self, command: str) -> "ExecChannel":
        """Start a command whose stdin and stdout are byte streams (cache pushes and pulls)."""
        try:
            channel = self._transport.open_session(window_size=16 << 20, max_packet_size=1 << 15,
                                                   timeout=self._settings.connect_timeout)
            channel.exec_command(command)  # nosec B601  # as in stream(): the host command is the point; its callers quote its values
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise ConnectError(self.host.name, f"could not start {command.split()[0]!r}: {exc}") from exc
        return ExecChannel(self.host.name, channel)

    def put_bytes(self, content: bytes, remote_path: str, mode: int = 0o644) -> None:
        """Write a file on the host through SFTP."""
        try:
            sftp = self._connection.sftp()
            with sftp.open(remote_path, "wb") as handle:
                handle.write(content)
            sftp.chmod(remote_path, mode)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise ConnectError(self.host.name, f"upload of {remote_path} failed: {exc}") from exc

    def fetch_file(self, remote_path: str, local_path: Path, max_bytes: int) -> tuple[int, str]:
        """Copy one host file to ``local_path`` through SFTP, at most ``max_bytes`` (a larger one is
        refused before a byte is copied, and cut off if it grows while read); returns its size
        and sha256, computed on the bytes as written. Written beside the target, then renamed:
        an interrupted copy never looks like a whole one."""
        import hashlib

        partial = local_path.with_name(local_path.name + ".part")
        digest, size = hashlib.sha256(), 0
        try:
            sftp = self._connection.sftp()
            if (sftp.stat(remote_path).st_size or 0) > max_bytes:
                raise host_bytes.HostBytesError(self.host.name, f"{remote_path}: larger than {max_bytes} bytes")
            partial.unlink(missing_ok=True)  # a stale one (or a link planted there) is never written through
            with sftp.open(remote_path, "rb") as source, os.fdopen(create_new_fd(partial), "wb") as target:
                while chunk := source.read(1 << 16):
                    size += len(chunk)
                    if size > max_bytes:
                        raise host_bytes.HostBytesError(self.host.name, f"{remote_path}: grew past {max_bytes} "
                                                                        "bytes while read")
                    digest.update(chunk)
                    target.write(chunk)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            partial.unlink(missing_ok=True)
            raise ConnectError(self.host.name, f"download of {remote_path} failed: {exc}") from exc
        except host_bytes.HostBytesError:
            partial.unlink(missing_ok=True)
            raise
        partial.replace(local_path)
        return size, digest.hexdigest()

    def close(self) -> None:
        self._monitor.stop()
        self._reaper.stop()
        try:
            self._connection.close()
        except Exception:
            pass


def _fabric_connection(host: Host, settings: TransportSettings) -> Connection:
    connect_kwargs: dict[str, object] = {
        "banner_timeout": settings.banner_timeout,
        "auth_timeout": settings.auth_timeout,
    }
    if host.key_file:
        connect_kwargs["key_filename"] = str(Path(host.key_file).expanduser())
        connect_kwargs["look_for_keys"] = False
        connect_kwargs["allow_agent"] = False
    config = Config(overrides={"run": {"hide": True, "warn": True}, "forward_agent": False,
                               "runners": {"remote": _BoundedRemote}})
    connection = Connection(
        host.address,
        user=host.user,
        port=host.port,
        config=config,
        connect_timeout=max(1, int(settings.connect_timeout)),
        connect_kwargs=connect_kwargs,
        forward_agent=False,  # an explicit argument wins over ~/.ssh/config's ForwardAgent
    )
    known_hosts = Path(host.vars.get("reprofleet_known_hosts") or settings.known_hosts).expanduser()
    connection.revoked_host_keys = _check_host_keys(connection, known_hosts, settings)  # checked once connected
    hop = connection.gateway
    while isinstance(hop, Connection):  # ProxyJump hops from ~/.ssh/config, nearest first
        _harden_hop(hop, known_hosts, settings)
        hop = hop.gateway
    return connection


def _check_host_keys(connection: Connection, known_hosts: Path, settings: TransportSettings) -> set[str]:
    """Load ``known_hosts`` into the connection's client and set the campaign's policy; the revoked keys."""
    client = connection.client
    revoked = load_known_hosts(client.get_host_keys(), known_hosts)
    if settings.accept_new_host_keys:
        client.set_missing_host_key_policy(_AcceptNewPolicy(known_hosts, frozenset(revoked)))
    else:
        client.set_missing_host_key_policy(_RejectPolicy())
    return revoked


def _harden_hop(hop: Connection, known_hosts: Path, settings: TransportSettings) -> None:
    """A jump host is checked like the host itself: same known_hosts, same policy, no agent, timeouts."""
    _check_host_keys(hop, known_hosts, settings)
    hop.forward_agent = False
    hop.connect_timeout = max(1, int(settings.connect_timeout))
    hop.connect_kwargs = {**hop.connect_kwargs, "banner_timeout": settings.banner_timeout,
                          "auth_timeout": settings.auth_timeout}


def connect(host: Host, settings: TransportSettings) -> Session:
    """Open an SSH connection with every timeout set and the host key checked."""
    connection = _fabric_connection(host, settings)
    try:
        connection.open()
    except paramiko.BadHostKeyException as exc:
        raise HostKeyError(
            host.name,
            f"host key CHANGED for {host.address}:{host.port} (known_hosts says otherwise); "
            "refusing to connect",
        ) from exc
    except RevokedHostKey as exc:
        raise HostKeyError(host.name, str(exc)) from exc
    except UnknownHostKey as exc:
        hop = f" (ProxyJump from ~/.ssh/config: {exc})" if isinstance(connection.gateway, Connection) else ""
        raise HostKeyError(
            host.name,
            f"unknown host key for {host.address}:{host.port}{hop}; "
            "run with --accept-new-host-keys to record it",
        ) from exc
    except paramiko.SSHException as exc:
        raise ConnectError(host.name, f"SSH failed: {exc}") from exc
    except (socket.timeout, TimeoutError) as exc:
        raise ConnectError(host.name, f"connect to {host.address}:{host.port} timed out") from exc
    except (OSError, EOFError) as exc:
        raise ConnectError(host.name, f"connect to {host.address}:{host.port} failed: {exc}") from exc
    server_key = connection.client.get_transport().get_remote_server_key()
    if server_key.get_base64() in getattr(connection, "revoked_host_keys", set()):
        connection.close()
        raise HostKeyError(host.name, f"the host key of {host.address}:{host.port} is marked @revoked in known_hosts")
    return Session(host, connection, settings)
