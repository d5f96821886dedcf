"""What software really ran: image digests, interpreter and package versions, venvs.

A tag such as ``vllm/vllm-openai:v0.25.1`` can point at another image tomorrow, and a host's
vLLM can be upgraded under a campaign. Before a host's first attempt each runtime its plan
uses is resolved on that host (the image found or pulled, the interpreter probed, the venv
built) and what it resolved to goes into every record and into the cell's identity, so
that two hosts that ran different images under one tag are never pooled as one cell.
Before every docker attempt a ``docker image inspect`` of the tag checks that it still
names the image the cell started with; a tag that moved stops that cell on that host.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping


from reprofleet.errors import AgentError, ReprofleetError
from reprofleet.records.reader import attempts_of
from reprofleet.model import Cell, PipOptions, Runtime, RuntimeKind, frozen_mapping
from reprofleet.playbook.venv import poc_requirement
from reprofleet.model.events import CampaignEvent
from reprofleet.remote import host_commands
from reprofleet.remote.agent import AgentClient
from reprofleet.runner.host_log import HostLog
from reprofleet.runner.stops import HostStops

PROBE_TIMEOUT_S = 120.0
BUILD_TIMEOUT_S = 3600.0  # a real vLLM pull or pip install takes minutes
CHECK_TIMEOUT_S = 30.0
MOVED_RULE = "runtime_moved"


# -- the playbook's venv runtime -------------------------------------------------------


def venv_name(runtime: Runtime) -> str:
    """One venv per vLLM version per host; other pip options get a folder of their own."""
    base = f"vllm-{runtime.vllm}"
    if runtime.pip == PipOptions():
        return base
    options = json.dumps(runtime.pip.as_dict(), sort_keys=True)
    return f"{base}-{hashlib.sha256(options.encode()).hexdigest()[:8]}"


def venv_python(state_root: str, runtime: Runtime) -> str:
    """The venv's interpreter on the host (the agent builds it under its state folder)."""
    return f"{state_root}/venvs/{venv_name(runtime)}/bin/python"


def describe(runtime: Runtime) -> str:
    """The dry run's words for a runtime."""
    if runtime.kind is RuntimeKind.DOCKER:
        return f"docker {runtime.image} (pulled or found per host; its digest recorded and checked before each attempt)"
    if runtime.kind is RuntimeKind.PYTHON:
        return f"python {runtime.python or 'python3'} (interpreter and vllm/torch/flashinfer/triton versions recorded)"
    where = (["--no-index"] if runtime.pip.no_index else []) + \
        ([f"--index-url {runtime.pip.index_url}"] if runtime.pip.index_url else []) + \
        [f"--find-links {link}" for link in runtime.pip.find_links] + list(runtime.pip.pins)
    return (f"venv vllm=={runtime.vllm} ({poc_requirement()}) built once per host in venvs/{venv_name(runtime)}"
            + (f"; pip {' '.join(where)}" if where else ""))


# -- what a host resolved a runtime to -----------------------------------------------------
# the fields RuntimeFacts.record_fields() gives a record (and its runtime_resolved event)
RECORDED_RUNTIME_KEYS = ("image_digest", "image_id", "interpreter", "versions", "venv")


@dataclass(frozen=True)
class RuntimeFacts:
    """One runtime as one host has it: the image (id, repo digest) or the interpreter and packages."""

    label: str
    image: str | None = None
    image_id: str | None = None
    image_digest: str | None = None  # repo digest, name@sha256:...
    interpreter: str | None = None
    python_version: str | None = None
    packages: Mapping[str, str | None] = field(default_factory=frozen_mapping)
    venv: str | None = None

    def record_fields(self) -> dict[str, Any]:
        """What a record's ``runtime`` gains (identity.RUNTIME_IDENTITY_KEYS picks what defines the cell)."""
        if self.image_id is not None:
            return {"image_digest": self.image_digest, "image_id": self.image_id}
        out: dict[str, Any] = {"interpreter": {"path": self.interpreter, "version": self.python_version},
                               "versions": {"python": self.python_version, **self.packages}}
        return {**out, "venv": self.venv} if self.venv else out


def image_facts(label: str, line: Mapping[str, Any]) -> RuntimeFacts:
    """From the agent's ``runtime image`` line: the repo digest of the tag's own repository first."""
    image = str(line.get("image") or label)
    digests = [str(d) for d in line.get("repo_digests") or ()]
    repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    own = [d for d in digests if d.split("@", 1)[0] in (repo, f"docker.io/{repo}", f"docker.io/library/{repo}")]
    chosen = own or digests
    return RuntimeFacts(label, image=image, image_id=str(line.get("id")), image_digest=chosen[0] if chosen else None)


def python_facts(label: str, line: Mapping[str, Any]) -> RuntimeFacts:
    interpreter = line.get("interpreter") or {}
    return RuntimeFacts(label, interpreter=interpreter.get("path"), python_version=interpreter.get("version"),
                        packages=frozen_mapping(line.get("packages") or {}), venv=line.get("venv"))


def resolve(agent: AgentClient, runtime: Runtime, base_python: str) -> tuple[RuntimeFacts, Mapping[str, Any]]:
    """Ask the host what ``runtime`` is there (pulling the image or building the venv first)."""
    if runtime.kind is RuntimeKind.DOCKER:
        action, settings, timeout = "image", {"image": runtime.image, "pull": True}, BUILD_TIMEOUT_S
    elif runtime.kind is RuntimeKind.PYTHON:
        action, settings, timeout = "python", {"python": runtime.python or "python3"}, PROBE_TIMEOUT_S
    else:
        action, timeout = "venv", BUILD_TIMEOUT_S
        settings = {"name": venv_name(runtime), "vllm": runtime.vllm, "requirement": poc_requirement(),
                    "base_python": base_python, **runtime.pip.as_dict()}
    reply = agent.runtime([action, "--json", json.dumps(settings, sort_keys=True)], timeout=timeout)
    if not reply.ok:
        raise AgentError(agent.host, f"runtime {runtime.label}: {reply.error or 'the agent said not ok'}")
    line = reply.line
    facts = image_facts(runtime.label, line) if action == "image" else python_facts(runtime.label, line)
    return facts, line


@dataclass(frozen=True)
class Moved:
    """A tag that names another image than the one its cell started with on this host."""

    cell: str
    tag: str
    old_id: str | None
    old_digest: str | None
    new_id: str | None
    new_digest: str | None

    @property
    def why(self) -> str:
        return (f"the tag {self.tag} moved during the campaign from {self.old_digest or self.old_id} to "
                f"{self.new_digest or self.new_id or 'no image'}; the cell stops on this host so that it never "
                "mixes two images")


class HostRuntimes:
    """One host's resolved runtimes, and the image each docker cell is held to.

    Owned by the host runner; it knows where its events go, the host's records so far (a
    resume), and its own state; the agent and the host's stops are handed to each call.
    """

    def __init__(self, log: HostLog, earlier: Iterable[Mapping[str, Any]] = (),
                 resolved_before: Iterable[Mapping[str, Any]] = ()) -> None:
        """``resolved_before``: this host's ``runtime_resolved`` events of earlier controllers of
        the campaign (a resume): what a record carries until this run resolves the runtime itself."""
        self.log = log
        self.facts: dict[str, RuntimeFacts] = {}  # by runtime label
        # what an earlier controller resolved here, by label: a resume that records the dead
        # controller's attempt (a host frozen while nobody watched, recorded before this run
        # could prepare it) records the runtime that attempt ran, not none (a second identity)
        self.before: dict[str, dict[str, Any]] = {
            str(e.get("runtime")): {k: e[k] for k in RECORDED_RUNTIME_KEYS if e.get(k) is not None}
            for e in resolved_before if e.get("runtime") is not None}
        self.held: dict[str, tuple[str | None, str | None]] = {}  # cell -> (image id, repo digest) it ran
        for record in attempts_of(earlier):  # a resumed campaign holds each cell to the image it already ran
            runtime = record.runtime
            if runtime.get("image_id") and record.cell not in self.held:
                self.held[record.cell] = (runtime.get("image_id"), runtime.get("image_digest"))

    def prepare(self, agent: AgentClient, cells: Iterable[Cell], base_python: str) -> None:
        """Resolve every runtime the host's plan uses, once, before its first attempt."""
        for cell in cells:
            runtime = cell.runtime
            if runtime.label in self.facts:
                continue
            facts, line = resolve(agent, runtime, base_python)
            self.facts[runtime.label] = facts
            extra = {k: line[k] for k in ("pulled", "created") if k in line}
            self.log.event(CampaignEvent.RUNTIME_RESOLVED, runtime=runtime.label, kind=runtime.kind.value,
                           **facts.record_fields(), **extra)

    def fields(self, cell: Cell) -> dict[str, Any]:
        facts = self.facts.get(cell.runtime.label)
        return facts.record_fields() if facts else dict(self.before.get(cell.runtime.label, {}))

    def check(self, agent: AgentClient, cell: Cell) -> Moved | None:
        """The cheap check before an attempt: does the tag still name the cell's image?"""
        facts = self.facts.get(cell.runtime.label)
        if cell.runtime.kind is not RuntimeKind.DOCKER or facts is None:
            return None
        old_id, old_digest = self.held.get(cell.name, (facts.image_id, facts.image_digest))
        tag = str(cell.runtime.image)
        new_id = host_commands.run_command(agent, host_commands.image_id(tag, CHECK_TIMEOUT_S))
        if new_id == old_id:
            self.held.setdefault(cell.name, (old_id, old_digest))
            return None
        listed = host_commands.run_command(agent, host_commands.image_digests(tag, CHECK_TIMEOUT_S))
        new = image_facts(cell.runtime.label, {"image": tag, "id": new_id, "repo_digests": list(listed)})
        return Moved(cell.name, tag, old_id, old_digest, new_id, new.image_digest)

    def moved(self, agent: Callable[[], AgentClient], stops: HostStops, cell: Cell, index: int,
              quarantined: bool) -> bool:
        """Whether ``cell`` stops on this host because its tag moved (its ``stopped`` event says
        so, tag and both digests, and its remaining slots are skipped as any stopped cell's)."""
        if quarantined or stops.is_stopped(cell.name) or cell.runtime.kind is not RuntimeKind.DOCKER:
            return False
        try:
            moved = self.check(agent(), cell)
        except ReprofleetError:
            return False  # the host does not answer: the attempt's own path records that
        if moved is None:
            return False
        stop = stops.stop(cell.name, MOVED_RULE, moved.why, None, error=True, tag=moved.tag,
                                 old_digest=moved.old_digest, new_digest=moved.new_digest, old_id=moved.old_id,
                                 new_id=moved.new_id)
        self.log.event(CampaignEvent.STOPPED, slot=index, **stop.event_fields())
        self.log.progress(cell=cell.name, phase="", status=f"stopped {cell.name}: {moved.why}")
        return True
