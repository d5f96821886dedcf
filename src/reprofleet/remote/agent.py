"""Controller side of the host agent protocol (collectors/PROTOCOL.md).

The agent is pushed under a content-hash name, so a host never runs a stale agent and a
second push of the same code costs one ``test -f``. Its stdout is JSON lines; anything
that is not is "the protocol broke" (AgentError), distinct from "the agent reported a
failure" (a line with ``k: error`` or a non-zero exit with details).

An attempt's stream is authenticated (collectors/attempt_mac.py): the controller makes a key
per attempt (:class:`AttemptKey`), hands it to the agent on stdin, and an :class:`EventStream`
with that key ignores every line but a heartbeat that does not carry the key's MAC, and
counts it (``forged``): the PoC runs as the agent's own user and can write the attempt's
files, but it cannot sign a line.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import json
import secrets as random_bytes
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from reprofleet.credentials import Secret
from reprofleet.errors import AgentError, AgentFenced, AgentRefused, HostLeased
from reprofleet.model import EventKind, frozen_mapping
from reprofleet.remote import host_bytes, replies
from reprofleet.remote.host_bytes import HostBytesError
from reprofleet.remote.transport import LineStream, Session

REMOTE_ROOT = ".cache/reprofleet"  # relative to the login user's home (SFTP starts there)


def collectors_dir() -> Path:
    """Where the host agent's source lives: packaged copy first, then the checkout."""
    packaged = Path(__file__).resolve().parents[1] / "_collectors"
    if (packaged / "agent.py").exists():
        return packaged
    checkout = Path(__file__).resolve().parents[3] / "collectors"
    if (checkout / "agent.py").exists():
        return checkout
    raise AgentError("controller", "the host agent (collectors/agent.py) is not installed")


@dataclass(frozen=True)
class AgentBundle:
    """The agent's files and the hash that names them on a host."""

    files: tuple[tuple[str, bytes], ...]
    digest: str

    @property
    def remote_dir(self) -> str:
        return f"{REMOTE_ROOT}/agent-{self.digest}"


BUNDLED_NVML = "pynvml_bundled.py"  # the controller's own nvidia-ml-py, for hosts whose Python has no pynvml


def nvml_binding_source() -> bytes | None:
    """The pure-Python ``pynvml`` module of the controller's ``nvidia-ml-py`` (a declared
    dependency), pushed with the agent so a host needs only the NVIDIA driver: Ubuntu's
    Python has no pynvml, and without it every read-back would be empty."""
    spec = importlib.util.find_spec("pynvml")
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin).read_bytes()


def load_bundle(source: Path | None = None) -> AgentBundle:
    root = source or collectors_dir()
    found = {p.name: p.read_bytes() for p in root.glob("*.py")}
    binding = nvml_binding_source()
    if binding is not None and BUNDLED_NVML not in found:
        found[BUNDLED_NVML] = binding  # content-addressed with the rest: a new nvidia-ml-py, a new agent folder
    files = tuple(sorted(found.items()))
    hasher = hashlib.sha256()
    for name, content in files:
        hasher.update(name.encode() + b"\0" + content + b"\0")
    return AgentBundle(files, hasher.hexdigest()[:12])


@dataclass(frozen=True)
class StreamEvent:
    """One line of an attempt stream, parsed; ``raw`` is the line exactly as received."""

    kind: EventKind
    t: float
    seq: int | None
    data: Mapping[str, Any] = field(default_factory=frozen_mapping)
    raw: str = ""


MAC_FIELD = "mac"  # collectors/attempt_mac.MAC_FIELD
UNSIGNED_KINDS = (EventKind.HEARTBEAT.value,)  # written by the streaming process itself, never read from the file


def canonical_line(line: Mapping[str, Any]) -> bytes:
    """The bytes a stream line's MAC covers (collectors/attempt_mac.canonical): the line less
    ``mac``, keys sorted, compact separators, ASCII."""
    body = {k: v for k, v in line.items() if k != MAC_FIELD}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


@dataclass(frozen=True)
class AttemptKey:
    """The per-attempt key that signs an attempt's lines on the host. It travels to the agent on
    stdin only; the campaign keeps it (hex, in a file only its user reads) so that a controller
    that died can still follow the attempt. Never printed: its repr hides it."""

    secret: bytes = field(repr=False)

    @classmethod
    def new(cls) -> "AttemptKey":
        return cls(random_bytes.token_bytes(32))

    @classmethod
    def from_hex(cls, text: str) -> "AttemptKey":
        """A stored key; ValueError unless it is 64 lowercase hex digits."""
        if len(text) != 64 or text.strip("0123456789abcdef"):
            raise ValueError("an attempt key is 64 lowercase hex digits")
        return cls(bytes.fromhex(text))

    @property
    def hex(self) -> str:
        return self.secret.hex()

    def mac(self, line: Mapping[str, Any]) -> str:
        return hmac.new(self.secret, canonical_line(line), hashlib.sha256).hexdigest()

    def signed(self, line: Mapping[str, Any]) -> bool:
        """True when ``line`` carries the MAC of its own content under this key."""
        given = line.get(MAC_FIELD)
        if not isinstance(given, str):
            return False
        try:
            return hmac.compare_digest(self.mac(line), given)
        except (TypeError, ValueError):
            return False


def parse_event(host: str, raw: str) -> StreamEvent:
    data = host_bytes.parse_object(host, raw, "stream")
    return event_of(host, data, raw)


def event_of(host: str, data: Mapping[str, Any], raw: str) -> StreamEvent:
    """A parsed stream line as an event; a malformed line is "the protocol broke" (AgentError)."""
    if not isinstance(data.get("k"), str):
        raise AgentError(host, f"not a stream line: {raw[:200]!r}")
    if data["k"] == "error":
        raise error_of(host, data)
    try:
        kind = EventKind(data["k"])
    except ValueError:
        kind = EventKind.NOTICE  # a kind from a newer agent: kept verbatim in the stream file
    if kind is EventKind.EXIT:
        replies.parse_exit(host, data)  # the outcome is judged from it: a malformed one is an AgentError here
    t, seq = data.get("t", 0.0), data.get("seq")
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        raise AgentError(host, f"stream: 't' is not a number: {raw[:200]!r}")
    if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int)):
        raise AgentError(host, f"stream: 'seq' is not a whole number: {raw[:200]!r}")
    return StreamEvent(kind, float(t), seq, frozen_mapping(data), raw)


ERROR_CODES: dict[str, type[AgentError]] = {"busy": AgentRefused, "fenced": AgentFenced, "leased": HostLeased}


def error_of(host: str, line: Mapping[str, Any], prefix: str = "") -> AgentError:
    """The typed error of an agent's ``{"k": "error", "code": ...}`` line (PROTOCOL.md)."""
    kind = ERROR_CODES.get(str(line.get("code")), AgentError)
    return kind(host, f"{prefix}{line.get('error')}")


class EventStream:
    """An attempt's stream as events, over one SSH channel. With the attempt's ``key``, a line
    that is not a heartbeat and does not carry the key's MAC is not an event: it is counted in
    ``forged`` (the first one kept, shortened, in ``first_forged``) and reading goes on."""

    def __init__(self, host: str, lines: LineStream, key: AttemptKey | None = None) -> None:
        self._host = host
        self._lines = lines
        self.key = key
        self.forged = 0
        self.first_forged: str | None = None
        self._taken = 0

    def next_event(self, timeout: float) -> StreamEvent | None:
        """The next event, or None if none arrived within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            line = self._lines.next_line(max(0.0, deadline - time.monotonic()))
            if line is None or not line.strip():
                if self._lines.finished and self._lines.exit_code not in (0, None):
                    detail = self._lines.stderr_tail.decode("utf-8", "replace").strip()
                    raise AgentError(self._host, f"stream ended with exit {self._lines.exit_code}: {detail}")
                return None
            event = self.accept(line)
            if event is not None:
                return event
            if time.monotonic() >= deadline:
                return None

    def accept(self, raw: str) -> StreamEvent | None:
        """One line as an event, or None (counted) when it fails its MAC. A signed line is the
        agent's word: its error (busy, fenced) or a malformed exit raises as without a key."""
        if self.key is None:
            return parse_event(self._host, raw)
        try:
            data: dict[str, Any] | None = host_bytes.parse_object(self._host, raw, "stream")
        except HostBytesError:
            data = None  # not even a line the agent writes: a forgery too (and not a reason to drop the stream)
        if data is not None and self.key.signed(data):
            return event_of(self._host, data, raw)
        if data is not None and data.get("k") in UNSIGNED_KINDS:
            try:
                return event_of(self._host, data, raw)
            except AgentError:
                pass  # a heartbeat no agent wrote
        self.forged += 1
        if self.first_forged is None:
            self.first_forged = raw[:200]
        return None

    def take_forged(self) -> int:
        """Forged lines counted since the last call."""
        fresh, self._taken = self.forged - self._taken, self.forged
        return fresh

    @property
    def finished(self) -> bool:
        return self._lines.finished

    def close(self) -> None:
        self._lines.close()


class AgentClient:
    """Runs agent subcommands on one host over an open session."""

    def __init__(self, session: Session, bundle: AgentBundle, python: str = "python3") -> None:
        self.session = session
        self.bundle = bundle
        self.python = python
        self.host = session.host.name
        self.lease_token: str | None = None  # a campaign's: every call that changes the host carries it (fencing)
        self.ignore_lease = False  # by hand, when a person said so: act on a leased host anyway
        self.fenced: str | None = None  # the agent said another controller holds the host: never touch it again

    @property
    def _agent(self) -> str:
        return f"{shlex.quote(self.python)} \"$HOME\"/{self.bundle.remote_dir}/agent.py"

    def push(self) -> None:
        """Upload the agent unless this exact version is already on the host."""
        marker = f'"$HOME"/{self.bundle.remote_dir}/.complete'
        if self.session.run(f"test -f {marker}", timeout=15).ok:
            return
        mkdir = self.session.run(f'mkdir -p "$HOME"/{self.bundle.remote_dir}', timeout=15)
        if not mkdir.ok:
            raise AgentError(self.host, f"cannot create the agent folder: {mkdir.stderr.strip()}")
        for name, content in self.bundle.files:
            self.session.put_bytes(content, f"{self.bundle.remote_dir}/{name}", 0o755)
        self.session.run(f"touch {marker}", timeout=15)

    def push_file(self, content: bytes, remote_rel_dir: str, name: str) -> str:
        """Upload one file under the agent's state root; returns its path relative to $HOME."""
        self.session.run(f'mkdir -p "$HOME"/{shlex.quote(f"{REMOTE_ROOT}/{remote_rel_dir}")}', timeout=15)
        path = f"{REMOTE_ROOT}/{remote_rel_dir}/{name}"
        self.session.put_bytes(content, path, 0o644)
        return path

    def call(self, args: list[str], timeout: float = 60.0, *, fenced: bool = False) -> list[dict[str, Any]]:
        """Run a one-shot subcommand; return its JSON lines. ``fenced``: it changes the host, so
        it carries this controller's lease token (on stdin) and is never sent once fenced."""
        flags, stdin = self.fence() if fenced else ([], None)
        command = f"{self._agent} {' '.join(shlex.quote(a) for a in [*args, *flags])}"
        result = self.session.run(command, timeout=timeout, stdin=stdin)
        lines = result.json_lines(self.host, args[0])
        coded = [line for line in lines if line.get("k") == "error" and line.get("code") in ERROR_CODES]
        if coded:
            raise self.noted(error_of(self.host, coded[0], f"{args[0]}: "))
        if result.exit_code == 2 or any(line.get("k") == "error" for line in lines):
            errors = [str(line.get("error")) for line in lines if line.get("k") == "error"]
            raise AgentError(self.host, f"{args[0]}: {'; '.join(errors) or result.stderr.strip()}")
        return lines

    def one(self, args: list[str], kind: str, timeout: float = 60.0, *, fenced: bool = False) -> dict[str, Any]:
        for line in self.call(args, timeout, fenced=fenced):
            if line.get("k") == kind:
                return line
        raise AgentError(self.host, f"{args[0]}: no {kind!r} line in the agent's output")

    def facts(self) -> replies.Facts:
        return replies.parse_facts(self.host, self.one(["facts"], "facts", timeout=60))

    def postboot(self, boot_id: str | None = None) -> replies.Postboot:
        """What the boot an attempt ran in left (``boot_id``; boot -1 when not known)."""
        args = ["postboot"] if boot_id is None else ["postboot", "--boot", boot_id]
        return replies.parse_postboot(self.host, self.one(args, "postboot", timeout=60))

    def health(self, gpu: int, *, bus_id: str | None = None, expect_gpus: int | None = None,
               smi_timeout_s: float = 20.0) -> replies.HealthReply:
        """``health --gpu N``: is the GPU still there (NVML, its PCI config space, nvidia-smi)?
        ``bus_id`` and ``expect_gpus`` are what the facts said before the wedge. A GPU that
        cannot be used is a reply (``ok`` false), not an exception."""
        args = ["health", "--gpu", str(gpu), "--smi-timeout", f"{smi_timeout_s:g}"]
        if bus_id:
            args += ["--bus-id", bus_id]
        if expect_gpus is not None:
            args += ["--expect-gpus", str(expect_gpus)]
        # NVML itself may hang on a GPU stuck in its driver: the call's own bound is the last word
        return replies.parse_health(self.host, self.one(args, "health", timeout=smi_timeout_s + 60.0))

    def fence(self) -> tuple[list[str], str | None]:
        """What fences a call that changes the host: the flag that says this controller's lease
        token is stdin's first line, and that line (never on the command line, where ``ps``
        shows it to every user of the host); or, by hand when a person said so, --ignore-lease.
        Once the agent has fenced this controller off, no such call is sent again (AgentFenced)."""
        if self.fenced is not None:
            raise AgentFenced(self.host, f"not sent: {self.fenced}")
        if self.lease_token:
            return ["--lease-stdin"], self.lease_token + "\n"
        return (["--ignore-lease"] if self.ignore_lease else []), None

    def noted(self, error: AgentError) -> AgentError:
        """A fenced refusal is remembered: this controller sends nothing that changes the host again."""
        if isinstance(error, AgentFenced) and self.fenced is None:
            self.fenced = error.reason
        return error

    def policy(self, action: str, gpu: int, settings: Mapping[str, Any] | None = None) -> replies.PolicyReply:
        args = ["policy", action, "--gpu", str(gpu)]
        if settings is not None:
            args += ["--json", json.dumps(dict(settings))]
        return replies.parse_policy(self.host, self.one(args, "policy", timeout=120, fenced=action != "read"))

    def host_debug(self, args: list[str]) -> replies.HostDebugReply:
        """``host-debug apply|read|restore`` (``args`` after the subcommand)."""
        return replies.parse_host_debug(self.host, self.one(["host-debug", *args], "host_debug", timeout=60,
                                                            fenced=args[:1] != ["read"]))

    def netconsole(self, args: list[str]) -> replies.NetconsoleReply:
        """``netconsole apply|read|restore`` (``args`` after the subcommand)."""
        return replies.parse_netconsole(self.host, self.one(["netconsole", *args], "netconsole", timeout=60,
                                                            fenced=args[:1] != ["read"]))

    def runtime(self, args: list[str], timeout: float) -> replies.RuntimeReply:
        """``runtime image|python|venv`` (``args`` after the subcommand): an image may be pulled
        and a venv built, so those two are fenced."""
        return replies.parse_runtime(self.host, self.one(["runtime", *args], "runtime", timeout=timeout,
                                                         fenced=args[:1] != ["python"]))

    def run(
        self,
        attempt_id: str,
        argv: list[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        gpu: int = 0,
        sample_hz: float | None = None,
        clock_threshold: float | None = None,
        container: str | None = None,
        secrets: Mapping[str, Secret] | None = None,
        key: AttemptKey | None = None,
    ) -> EventStream:
        """Start an attempt; ``container``: the docker container the PoC runs as, which the
        agent kills at the attempt's end (the docker client's death does not stop it).
        ``secrets`` (env_secrets) go to the agent as one JSON line on stdin, never on its
        command line, where every user of the host could read them with ``ps``. ``key``
        signs every line of the attempt (see :class:`AttemptKey`): its first line on stdin;
        the stream then accepts only lines signed with it."""
        flags, token = self.fence()
        args = ["run", "--id", attempt_id, "--timeout", f"{timeout:g}", "--gpu", str(gpu), *flags]
        if key is not None:
            args.append("--key-stdin")
        if secrets:
            args.append("--secrets-stdin")
        if container:
            args += ["--container", container]
        for name, value in (env or {}).items():
            args += ["--env", f"{name}={value}"]
        if cwd:
            args += ["--cwd", cwd]
        if sample_hz is not None:
            args += ["--sample-hz", f"{sample_hz:g}"]
        if clock_threshold is not None:
            args += ["--clock-threshold", f"{clock_threshold:g}"]
        command = f"{self._agent} {' '.join(shlex.quote(a) for a in args)} -- {shlex.join(argv)}"
        given = (token or "").encode() + ((key.hex + "\n").encode() if key is not None else b"")
        if secrets:
            given += (json.dumps({name: value.reveal() for name, value in secrets.items()}) + "\n").encode()
        return EventStream(self.host, self.session.stream(command, stdin=given or None), key)

    def attach(self, attempt_id: str, from_seq: int, key: AttemptKey | None = None) -> EventStream:
        """Follow an attempt from ``from_seq``; with its ``key`` (on stdin), only its own signed
        exit line ends the stream, and the stream accepts only signed lines."""
        command = f"{self._agent} attach --id {shlex.quote(attempt_id)} --from {from_seq}"
        if key is None:
            return EventStream(self.host, self.session.stream(command))
        return EventStream(self.host, self.session.stream(f"{command} --key-stdin", stdin=(key.hex + "\n").encode()),
                           key)

    def kill(self, attempt_id: str) -> replies.KillReply:
        # the supervisor's own end may take its kill grace and a docker kill (15 s at most)
        return replies.parse_kill(self.host, self.one(["kill", "--id", attempt_id], "killed", timeout=60,
                                                      fenced=True))

    def attempts(self, running_only: bool = False) -> tuple[replies.AttemptListing, ...]:
        """The host's newest attempts: ``running`` (supervisor alive), ``exited`` or ``lost``."""
        line = self.one(["attempts"] + (["--running"] if running_only else []), "attempts", timeout=30)
        return replies.parse_attempts(self.host, line)

    def lease(self, action: str, *, controller: str = "", campaign: str = "", pid: int = 0,
              break_lease: bool = False, ttl_s: float | None = None) -> replies.LeaseReply:
        """Take (``acquire``), give back (``release``) or read (``show``) the host's campaign lease,
        under this client's ``lease_token``.

        A refusal is data (``ok`` false, ``error`` naming the holder), not an exception.
        """
        args = ["lease", action, "--controller", controller, "--campaign", campaign, "--pid", str(pid)]
        token = None
        if action != "show":
            args.append("--lease-stdin")
            token = (self.lease_token or "") + "\n"
        if ttl_s is not None:
            args += ["--ttl", f"{ttl_s:g}"]
        if break_lease:
            args.append("--break")
        command = f"{self._agent} {' '.join(shlex.quote(a) for a in args)}"
        result = self.session.run(command, timeout=30, stdin=token)
        lines = result.json_lines(self.host, f"lease {action}")
        for line in lines:
            if isinstance(line, Mapping) and line.get("k") == "lease":
                return replies.parse_lease(self.host, line)
        raise AgentError(self.host, f"lease {action}: {result.stderr.strip() or 'no lease line'}")


def agent_command(agent: AgentClient, args: list[str]) -> str:
    """The shell command that runs one agent subcommand, for a caller that streams its bytes
    over an exec channel of its own (the cache's objects) instead of ``AgentClient``'s calls."""
    return f"{agent._agent} " + " ".join(shlex.quote(a) for a in args)


def fenced_agent_command(agent: AgentClient, args: list[str]) -> tuple[str, bytes]:
    """As :func:`agent_command` for a subcommand that changes the host: the command, and the
    bytes to write on its stdin before anything else (the lease token's line, or none)."""
    flags, token = agent.fence()
    return agent_command(agent, [*args, *flags]), (token or "").encode()
