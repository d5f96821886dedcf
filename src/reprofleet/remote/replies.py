"""The agent's one-shot replies as typed values: parsed here, and nowhere else.

A host's bytes are untrusted (DESIGN.md), so every reply the controller reads is checked
once, at this edge, against collectors/PROTOCOL.md: a field of the wrong type is "the
protocol broke" (AgentError naming the host and the field), not a ``TypeError`` three
modules later. A missing optional field reads as the protocol's default (``ok`` false, no
errors, an empty read-back), exactly as the callers' ``.get`` used to. Values that go into
records unchanged (facts, a policy read-back, sysctls) are kept as the host sent them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from reprofleet.errors import AgentError
from reprofleet.model import frozen_mapping

_NUMBER = (int, float)


class _Fields:
    """One reply line, read field by field; a field of the wrong type raises AgentError."""

    def __init__(self, host: str, kind: str, line: Any) -> None:
        if not isinstance(line, Mapping):
            raise AgentError(host, f"{kind}: the reply is not a JSON object: {str(line)[:200]!r}")
        self.host, self.kind, self.line = host, kind, line

    def _bad(self, key: str, wanted: str) -> AgentError:
        return AgentError(self.host, f"{self.kind}: {key!r} is not {wanted}: {str(self.line.get(key))[:200]!r}")

    def flag(self, key: str) -> bool:
        value = self.line.get(key)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self._bad(key, "true or false")
        return value

    def optional_flag(self, key: str) -> bool | None:
        return None if self.line.get(key) is None else self.flag(key)

    def text(self, key: str) -> str | None:
        value = self.line.get(key)
        if value is not None and not isinstance(value, str):
            raise self._bad(key, "a string")
        return value

    def number(self, key: str) -> float | None:
        value = self.line.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, _NUMBER):
            raise self._bad(key, "a number")
        return value  # as sent (an int stays an int: events and records write it unchanged)

    def mapping(self, key: str) -> Mapping[str, Any]:
        value = self.line.get(key)
        if value is None:
            return frozen_mapping()
        if not isinstance(value, Mapping):
            raise self._bad(key, "an object")
        return frozen_mapping(value)

    def items(self, key: str) -> tuple[Any, ...]:
        value = self.line.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self._bad(key, "a list")
        return tuple(value)

# -- facts ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Facts:
    """``facts``: what the runner decides on, and the whole reply as facts/<host>.json keeps it."""

    boot_id: str | None
    uptime_s: float
    gpus: tuple[Mapping[str, Any], ...]
    as_json: Mapping[str, Any] = field(default_factory=frozen_mapping)


def parse_facts(host: str, line: Any) -> Facts:
    fields = _Fields(host, "facts", line)
    gpus = fields.items("gpus")
    if not all(isinstance(gpu, Mapping) for gpu in gpus):
        raise fields._bad("gpus", "a list of objects")
    return Facts(fields.text("boot_id"), fields.number("uptime_s") or 0.0, tuple(frozen_mapping(g) for g in gpus),
                 frozen_mapping(line))


# -- settings the agent applies and reads back: GPU policy, sysctls, netconsole -----------
@dataclass(frozen=True)
class PolicyReply:
    """``policy apply|read|restore``: the read-back is what records keep as ``policy``."""

    ok: bool
    readback: Mapping[str, Any]
    errors: tuple[Any, ...] = ()  # words, as the host sent them
    notes: tuple[Any, ...] = ()


def parse_policy(host: str, line: Any) -> PolicyReply:
    fields = _Fields(host, "policy", line)
    return PolicyReply(fields.flag("ok"), fields.mapping("readback"), fields.items("errors"), fields.items("notes"))


@dataclass(frozen=True)
class HostDebugReply:
    """``host-debug apply|read|restore``: the kernel's sysctls as read back."""

    ok: bool
    values: Mapping[str, Any]
    errors: tuple[Any, ...] = ()  # words, as the host sent them
    notes: tuple[Any, ...] = ()


def parse_host_debug(host: str, line: Any) -> HostDebugReply:
    fields = _Fields(host, "host_debug", line)
    return HostDebugReply(fields.flag("ok"), fields.mapping("values"), fields.items("errors"), fields.items("notes"))


@dataclass(frozen=True)
class NetconsoleReply:
    """``netconsole apply|restore``: the target as configured (``config`` null when none)."""

    ok: bool
    config: Mapping[str, Any] | None
    printk: tuple[Any, ...] | None
    errors: tuple[Any, ...] = ()  # words, as the host sent them
    notes: tuple[Any, ...] = ()


def parse_netconsole(host: str, line: Any) -> NetconsoleReply:
    fields = _Fields(host, "netconsole", line)
    config = None if line.get("config") is None else fields.mapping("config")
    printk = None if line.get("printk") is None else fields.items("printk")
    return NetconsoleReply(fields.flag("ok"), config, printk, fields.items("errors"), fields.items("notes"))


@dataclass(frozen=True)
class RuntimeReply:
    """``runtime image|python|venv``: ok or why not; the fields runtimes.py reads stay in ``line``."""

    ok: bool
    error: str | None
    line: Mapping[str, Any]


def parse_runtime(host: str, line: Any) -> RuntimeReply:
    fields = _Fields(host, "runtime", line)
    fields.items("repo_digests"), fields.mapping("interpreter"), fields.mapping("packages")  # their shapes
    return RuntimeReply(fields.flag("ok"), fields.text("error"), frozen_mapping(line))


# -- attempts on the host, and the lease ------------------------------------------------
@dataclass(frozen=True)
class AttemptListing:
    """One entry of ``attempts``: an attempt the host knows, newest first. ``container``: a
    running docker container labelled with it (``supervisor_alive`` false when only the
    container is left: the docker client's death does not stop it)."""

    id: str
    status: str  # running | exited | lost
    age_s: float | None = None
    boot_id: str | None = None
    reason: str | None = None
    container: str | None = None
    supervisor_alive: bool | None = None


def parse_attempts(host: str, line: Any) -> tuple[AttemptListing, ...]:
    fields = _Fields(host, "attempts", line)
    listed = []
    for entry in fields.items("attempts"):
        one = _Fields(host, "attempts entry", entry)
        ident = one.text("id")
        if not ident:
            raise one._bad("id", "an attempt id")
        listed.append(AttemptListing(ident, one.text("status") or "", one.number("age_s"), one.text("boot_id"),
                                     one.text("reason"), one.text("container"), one.optional_flag("supervisor_alive")))
    return tuple(listed)


@dataclass(frozen=True)
class KillReply:
    """``kill``: whether the attempt was still running when asked; for a docker attempt, the
    container and whether ``docker kill`` stopped it running (``container_error``: why not)."""

    id: str | None
    was_running: bool
    container: str | None = None
    container_killed: bool = False
    container_error: str | None = None

    def container_fields(self) -> dict[str, Any]:
        """For an event: the container and what docker did to it (nothing without one)."""
        if self.container is None:
            return {}
        fields: dict[str, Any] = {"container": self.container, "container_killed": self.container_killed}
        if self.container_error:
            fields["container_error"] = self.container_error
        return fields


def parse_kill(host: str, line: Any) -> KillReply:
    fields = _Fields(host, "killed", line)
    return KillReply(fields.text("id"), fields.flag("was_running"), fields.text("container"),
                     fields.flag("container_killed"), fields.text("container_error"))


@dataclass(frozen=True)
class LeaseReply:
    """``lease``: a refusal is data (``ok`` false, ``error`` naming the holder)."""

    ok: bool
    error: str | None = None
    lease: Mapping[str, Any] | None = None
    broken: Mapping[str, Any] | None = None  # the lease a --break took over
    held: Mapping[str, Any] | None = None  # on a refusal: whose lease it is

    @property
    def live(self) -> Mapping[str, Any] | None:
        """``show``'s lease while it holds (renewed within its TTL, as host_lease.expired judges), else None."""
        lease = self.lease
        if not lease or float(lease.get("age_s") or 0.0) > float(lease.get("ttl_s") or 0.0):
            return None
        return lease


def parse_lease(host: str, line: Any) -> LeaseReply:
    fields = _Fields(host, "lease", line)
    lease = None if line.get("lease") is None else fields.mapping("lease")
    broken = None if not line.get("broken") else fields.mapping("broken")
    held = None if not line.get("held") else fields.mapping("held")
    error = line.get("error")
    return LeaseReply(fields.flag("ok"), None if error is None else str(error), lease, broken, held)


# -- what the previous boot left ---------------------------------------------------------
@dataclass(frozen=True)
class ShutdownEvidence:
    """How the previous boot ended, from its whole journal (collectors/shutdown_evidence.py):
    ``orderly`` when systemd's stop sequence (or the kernel's reboot line) is in it and no
    panic is; ``by`` who asked, where the journal says; ``lines`` the lines that say so."""

    orderly: bool = False
    by: str | None = None
    lines: tuple[str, ...] = ()
    available: bool | None = None  # the journal of the previous boot could be read (None: an older agent)
    reason: str | None = None  # why it could not

    def as_json(self) -> dict[str, Any]:
        """As a record's forensics keep it (``forensics["shutdown"]``)."""
        out: dict[str, Any] = {"orderly": self.orderly, "by": self.by, "lines": list(self.lines)}
        if self.available is not None:
            out["available"] = self.available
        if self.reason:
            out["reason"] = self.reason
        return out


def parse_shutdown(host: str, line: Any) -> ShutdownEvidence:
    fields = _Fields(host, "postboot shutdown", line)
    lines = fields.items("lines")
    if not all(isinstance(text, str) for text in lines):
        raise fields._bad("lines", "a list of strings")
    orderly = fields.flag("orderly")
    return ShutdownEvidence(orderly, fields.text("by") if orderly else None, tuple(lines),
                            fields.optional_flag("available"), fields.text("reason"))


@dataclass(frozen=True)
class PreviousBoot:
    available: bool | None
    findings: tuple[Any, ...] = ()
    tail: tuple[Any, ...] = ()
    reason: str | None = None
    shutdown: ShutdownEvidence = field(default_factory=ShutdownEvidence)  # an older agent's: not orderly, unknown


@dataclass(frozen=True)
class Postboot:
    """``postboot``: the previous boot's kernel log and pstore, as the forensics keep them."""

    boot_id: str | None
    journal_persistent: bool | None
    previous_boot: PreviousBoot
    pstore: tuple[Any, ...] = ()


def parse_postboot(host: str, line: Any) -> Postboot:
    fields = _Fields(host, "postboot", line)
    previous = _Fields(host, "postboot previous_boot", fields.mapping("previous_boot"))
    shutdown = ShutdownEvidence() if previous.line.get("shutdown") is None else \
        parse_shutdown(host, previous.mapping("shutdown"))
    return Postboot(fields.text("boot_id"), fields.optional_flag("journal_persistent"),
                    PreviousBoot(previous.optional_flag("available"), previous.items("findings"),
                                 previous.items("tail"), previous.text("reason"), shutdown),
                    fields.items("pstore"))


# -- is the GPU still there (after a wedge) ---------------------------------------------
HEALTH_CHECKS = ("nvml", "pci", "nvidia_smi")  # collectors/gpu_health.CHECKS, in its order


@dataclass(frozen=True)
class HealthCheck:
    """One witness of ``health``: ``ok`` true (passed), false (the GPU cannot be used) or None
    (it could not run on that host); ``lost``: its evidence says the GPU itself is gone."""

    name: str
    ok: bool | None
    lost: bool
    words: str
    short: str

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "lost": self.lost, "words": self.words}


@dataclass(frozen=True)
class HealthReply:
    """``health --gpu N``: each check's result and words (collectors/gpu_health.py)."""

    ok: bool
    lost: bool
    bus_id: str | None
    boot_id: str | None
    checks: tuple[HealthCheck, ...] = ()

    @property
    def failed(self) -> tuple[HealthCheck, ...]:
        return tuple(check for check in self.checks if check.ok is False)


def parse_health(host: str, line: Any) -> HealthReply:
    fields = _Fields(host, "health", line)
    checks = []
    for entry in fields.items("checks"):
        one = _Fields(host, "health check", entry)
        name, words = one.text("name"), one.text("words")
        if not name or words is None:
            raise one._bad("name", "a named check with words")
        checks.append(HealthCheck(name, one.optional_flag("ok"), one.flag("lost"), words, one.text("short") or words))
    ok = fields.flag("ok")
    if ok and any(check.ok is False for check in checks):  # the summary must not hide a failed check
        raise fields._bad("ok", "false when a check failed")
    return HealthReply(ok, fields.flag("lost"), fields.text("bus_id"), fields.text("boot_id"), tuple(checks))


# -- the last line of an attempt's stream --------------------------------------------------
@dataclass(frozen=True)
class ExitLine:
    """A stream's ``exit`` line: how the PoC ended (``lost``: the supervisor is gone)."""

    rc: int | None
    signal: int | None
    timed_out: bool
    killed: bool
    lost: bool
    rebooted: bool
    duration_s: float | None
    telemetry: Mapping[str, Any] | None
    error: str | None = None
    stuck: bool = False
    reason: str | None = None
    container: str | None = None  # a docker attempt's container, stopped by the agent at the end
    container_killed: bool = False  # docker killed it still running (the client's end had not stopped it)
    container_error: str | None = None


def _whole(fields: _Fields, key: str) -> int | None:
    value = fields.line.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise fields._bad(key, "a whole number")
    return value


def parse_exit(host: str, line: Any) -> ExitLine:
    """Checked where a stream line is parsed (agent.parse_event), so that a malformed exit is
    the protocol breaking, before any outcome is judged from it."""
    fields = _Fields(host, "exit", line)
    telemetry = None if line.get("telemetry") is None else fields.mapping("telemetry")
    return ExitLine(_whole(fields, "rc"), _whole(fields, "signal"), fields.flag("timed_out"), fields.flag("killed"),
                    fields.flag("lost"), fields.flag("rebooted"), fields.number("duration_s"), telemetry,
                    fields.text("error"), fields.flag("stuck"), fields.text("reason"), fields.text("container"),
                    fields.flag("container_killed"), fields.text("container_error"))
