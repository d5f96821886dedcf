"""A ClusterLabs fence agent as a program: where it is, what its metadata says, one run of it.

The Fence Agent API (ClusterLabs fence-agents, Debian ``fence-agents``) is a contract between
a cluster manager and a command-line program, and this module holds our side of it:

- the agent reads its options as ``name=value`` lines on **stdin** (``action=status``,
  ``ip=...``, ``password=...``): the one place a secret may travel, since a program's argv
  is readable by every local user in ``ps``;
- ``action=metadata`` prints an XML description: ``<parameter name=...>`` for every option
  it takes and ``<action name=...>`` for every action it has (``diag`` only where the device
  can send an NMI). An option the agent does not know is only *warned about* and ignored by
  the agent, so a misspelt ``cipher`` would silently fall back to its default: we check the
  names against the metadata before anything runs, reading it once per agent program;
- exit codes: ``0`` success (``status``: on), ``2`` off (``status`` only), ``1`` every
  failure (a login refused, no answer, a timeout waiting for the state: fencing.py's
  ``fail()`` exits 1 for each). Nothing finer is promised, so nothing finer is read.

The agent's own process gets the controller's environment without any named credential
variable (``credentials.child_environment``), its own session (a timeout kills the agent
and the ``ipmitool``/``snmpget`` it started), and a deadline.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import xml.etree.ElementTree as ElementTree  # nosec B405  # the agent's own metadata, from a local program
from dataclasses import dataclass
from typing import Mapping

from reprofleet.credentials import child_environment
from reprofleet.errors import PowerError

__all__ = ["AgentMetadata", "AgentRun", "find_agent", "metadata_for", "option_lines", "parse_metadata", "run_agent"]

AGENT_NAME = re.compile(r"fence_[a-z0-9_]+")
# Debian installs the agents in /usr/sbin, which a non-root user's PATH often lacks.
SYSTEM_DIRS = ("/usr/sbin", "/sbin")
METADATA_TIMEOUT_S = 20.0
KILL_WAIT_S = 5.0


@dataclass(frozen=True)
class AgentMetadata:
    """What one agent says it takes and does (its ``metadata`` XML)."""

    agent: str
    parameters: frozenset[str]  # option names, as on stdin (``ip``, ``username``, ``plug``, ``lanplus`` ...)
    required: frozenset[str]  # parameters it marks required="1" (deprecated aliases left out)
    actions: frozenset[str]  # ``on``, ``off``, ``status``, ``reboot``, ``diag`` ...

    def takes(self, name: str) -> bool:
        """Does the agent know option ``name``? (stdin names may use ``-`` for ``_``, as the agent allows)."""
        return name in self.parameters or name.replace("-", "_") in self.parameters


@dataclass(frozen=True)
class AgentRun:
    """One finished run of an agent: its exit status and what it printed (never shown raw in the log)."""

    returncode: int
    stdout: str
    stderr: str


class AgentMetadataError(PowerError):
    """An agent's metadata could not be read or is not the XML the API promises."""


class AgentTimeout(PowerError):
    """An agent did not finish within its deadline (it was killed with what it started)."""


def find_agent(name: str) -> str:
    """The agent program's path: ``name`` must be ``fence_[a-z0-9_]+`` (never a path, never an option)."""
    if not AGENT_NAME.fullmatch(name):
        raise PowerError(f"agent {name!r} is not a fence agent's name (fence_ followed by a-z, 0-9, _)")
    search = os.pathsep.join([os.environ.get("PATH", ""), *SYSTEM_DIRS])
    path = shutil.which(name, path=search)
    if path is None:
        raise PowerError(f"fence agent {name} is not installed (not on PATH nor in {', '.join(SYSTEM_DIRS)}): "
                         "on Debian, apt-get install fence-agents")
    return path


def option_lines(options: Mapping[str, str]) -> str:
    """The agent's stdin: one ``name=value`` line per option. A value with a line break would be read
    as a further option, so it is refused (an inventory value reaching here is checked already)."""
    for name, value in options.items():
        if "\n" in value or "\r" in value or "\n" in name or "=" in name:
            raise PowerError(f"fence agent option {name.splitlines()[0][:40]!r}: a name or value with a line break")
    return "".join(f"{name}={value}\n" for name, value in options.items())


def run_agent(path: str, options: Mapping[str, str], timeout_s: float) -> AgentRun:
    """Run the agent once with ``options`` on stdin; AgentTimeout when it outlives ``timeout_s``."""
    try:
        child = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env=child_environment(), text=True, start_new_session=True)
    except OSError as exc:
        raise PowerError(f"fence agent {os.path.basename(path)} could not start: {exc.strerror}") from None
    try:
        stdout, stderr = child.communicate(input=option_lines(options), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        raise AgentTimeout(f"fence agent {os.path.basename(path)} did not finish within {timeout_s:g} s") from None
    return AgentRun(child.returncode, stdout, stderr)


def _kill_group(child: subprocess.Popen[str]) -> None:
    """End the agent and whatever it started (ipmitool, snmpget): they share its session."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        child.communicate(timeout=KILL_WAIT_S)
    except subprocess.TimeoutExpired:
        pass


def parse_metadata(agent: str, xml_text: str) -> AgentMetadata:
    """The Fence Agent API's ``metadata`` XML -> AgentMetadata (pure; errors name the agent)."""
    start = xml_text.find("<")
    text = xml_text[start:] if start >= 0 else xml_text
    try:
        root = ElementTree.fromstring(text)  # nosec B314  # the agent's own metadata, from a local program
    except ElementTree.ParseError as exc:
        raise AgentMetadataError(f"fence agent {agent}: its metadata is not XML ({exc})") from None
    if root.tag != "resource-agent":
        raise AgentMetadataError(f"fence agent {agent}: its metadata is <{root.tag}>, not <resource-agent>")
    parameters = [p for p in root.iter("parameter") if p.get("name")]
    actions = frozenset(str(a.get("name")) for a in root.iter("action") if a.get("name"))
    if not parameters or not actions:
        raise AgentMetadataError(f"fence agent {agent}: its metadata lists no parameters or no actions")
    return AgentMetadata(
        agent=agent,
        parameters=frozenset(str(p.get("name")) for p in parameters),
        required=frozenset(str(p.get("name")) for p in parameters  # a deprecated alias's new name is required too
                           if p.get("required") == "1" and p.get("deprecated") != "1"),
        actions=actions,
    )


_CACHE: dict[str, AgentMetadata] = {}
_CACHE_LOCK = threading.Lock()


def metadata_for(path: str) -> AgentMetadata:
    """The metadata of the agent at ``path``, read once per program per process (it never changes under us)."""
    with _CACHE_LOCK:
        known = _CACHE.get(path)
        if known is not None:
            return known
        agent = os.path.basename(path)
        try:
            done = run_agent(path, {"action": "metadata"}, METADATA_TIMEOUT_S)
        except AgentTimeout as exc:
            raise AgentMetadataError(str(exc)) from None
        if done.returncode != 0:
            raise AgentMetadataError(f"fence agent {agent}: action=metadata exited {done.returncode}")
        metadata = parse_metadata(agent, done.stdout)
        _CACHE[path] = metadata
        return metadata
