"""Every short shell command the controller runs on a host, each with its pure parser.

pyinfra's shape: a fact is the command to run and a pure function from its output to a typed
value. The commands live here and nowhere else (tests/unit/test_architecture_claims.py greps
for raw ``session.run`` outside ``remote/``), their parsers are golden-tested
(tests/fixtures/host_commands/), and the seam's fake host answers exactly these commands and
fails a test on any other. The agent's own subcommands (``remote/agent.py``) are the rest of
what the controller asks of a host.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

from reprofleet.errors import ConnectError
from reprofleet.remote import host_bytes
from reprofleet.remote.agent import AgentClient
from reprofleet.remote.transport import CommandResult

T = TypeVar("T")

__all__ = ["BootNow", "HostCommand", "boot_now", "boots_listed", "cache_manifest", "home_folder", "image_digests",
           "image_id", "prepare_cache", "run_command"]


@dataclass(frozen=True)
class HostCommand(Generic[T]):
    """One command and the pure parser of what it printed (``host`` names the host in errors)."""

    what: str  # a short name: the golden fixtures' folder, and the words of an error
    command: str
    parse: Callable[[str, CommandResult], T]
    timeout_s: float = 15.0


def run_command(agent: AgentClient, fact: HostCommand[T]) -> T:
    """Run ``fact`` on the agent's host, over its session, and parse what it printed (the parser
    sees the exit status too)."""
    result = agent.session.run(fact.command, timeout=fact.timeout_s)
    return fact.parse(agent.host, result)


# -- the login's home folder ------------------------------------------------------------------
def _parse_home(host: str, result: CommandResult) -> str:
    return result.stdout.strip()


def home_folder() -> HostCommand[str]:
    """``$HOME`` of the login: the agent's files and the PoC's state folder live under it."""
    return HostCommand("home", 'printf %s "$HOME"', _parse_home)


# -- the boot the host is in --------------------------------------------------------------------
@dataclass(frozen=True)
class BootNow:
    """The host's boot_id and how long it has been up (a new boot_id is a new boot)."""

    boot_id: str
    uptime_s: float


def _parse_boot(host: str, result: CommandResult) -> BootNow:
    words = result.stdout.split()
    try:
        uptime_s = float(words[1]) if len(words) >= 2 else math.nan
    except ValueError:
        uptime_s = math.nan
    if not math.isfinite(uptime_s):
        raise ConnectError(host, f"cannot read boot_id and uptime: {result.stdout[:120]!r}")
    return BootNow(words[0], uptime_s)


def boot_now() -> HostCommand[BootNow]:
    """The boot_id and the uptime, in one round trip."""
    return HostCommand("boot", "cat /proc/sys/kernel/random/boot_id; cut -d' ' -f1 /proc/uptime", _parse_boot)


# -- the boots the journal knows ------------------------------------------------------------------
_JOURNAL_BOOT_ID = re.compile(r"[0-9a-f]{32}")


def _parse_boots(host: str, result: CommandResult) -> tuple[str, ...]:
    """Boot ids (without dashes, as journalctl prints them), oldest first. systemd 252 and later
    print an ``IDX BOOT ID FIRST ENTRY LAST ENTRY`` header, older ones none: a line counts when
    its second word is a boot id."""
    words = (line.split() for line in result.stdout.splitlines())
    return tuple(w[1] for w in words if len(w) > 1 and _JOURNAL_BOOT_ID.fullmatch(w[1]))


def boots_listed() -> HostCommand[tuple[str, ...]]:
    """``journalctl --list-boots``: every boot the journal holds, oldest first."""
    return HostCommand("boots", "journalctl --list-boots --no-pager", _parse_boots)


# -- docker images ----------------------------------------------------------------------------------
def _parse_image_id(host: str, result: CommandResult) -> str | None:
    return (result.stdout.strip() or None) if result.ok else None


def image_id(tag: str, timeout_s: float = 30.0) -> HostCommand[str | None]:
    """The image id ``tag`` names on the host now (None: no such image, or no docker)."""
    return HostCommand("image_id", f"docker image inspect --format '{{{{.Id}}}}' {shlex.quote(tag)}",
                       _parse_image_id, timeout_s)


def _parse_digests(host: str, result: CommandResult) -> tuple[str, ...]:
    if not result.ok:
        return ()
    try:
        listed: Any = host_bytes.parse_json(host, result.stdout.strip(), "docker image inspect")
    except host_bytes.HostBytesError:
        return ()
    return tuple(str(d) for d in listed) if isinstance(listed, list) else ()


def image_digests(tag: str, timeout_s: float = 30.0) -> HostCommand[tuple[str, ...]]:
    """The repo digests of the image ``tag`` names (empty for an imported image, or on any failure)."""
    return HostCommand("image_digests", f"docker image inspect --format '{{{{json .RepoDigests}}}}' {shlex.quote(tag)}",
                       _parse_digests, timeout_s)


# -- the attempt's cache folder -------------------------------------------------------------------
@dataclass(frozen=True)
class Done:
    """A command whose output is not data: did it work, and if not, its words."""

    ok: bool
    error: str


def _parse_done(host: str, result: CommandResult) -> Done:
    return Done(result.ok, "" if result.ok else result.stderr.strip())


def prepare_cache(cache_dir: str, archive_path: str | None) -> HostCommand[Done]:
    """The cache folder ready before an attempt: unpacked from the starting cache while it is
    empty (never over a warm one), else just made. Every path is shell-quoted: a host's
    ``$HOME`` is part of it."""
    folder = shlex.quote(cache_dir)
    if archive_path:
        archive = shlex.quote(archive_path)
        command = f'mkdir -p {folder} && if [ -z "$(ls -A {folder})" ]; then tar -xzf {archive} -C {folder}; fi'
    else:
        command = f"mkdir -p {folder}"
    return HostCommand("prepare_cache", command, _parse_done, 120.0)


def _parse_manifest(host: str, result: CommandResult) -> str | None:
    return result.stdout.strip() or None


def cache_manifest(cache_dir: str) -> HostCommand[str | None]:
    """A hash of the cache's entries (type, name, size): tells a cold cache from a warm one, cheaply."""
    folder = shlex.quote(cache_dir)
    return HostCommand("cache_manifest",
                       f"cd {folder} && find . -mindepth 1 -printf '%y %P %s\\n' | LC_ALL=C sort | sha256sum | cut -c1-16",
                       _parse_manifest, 60.0)
