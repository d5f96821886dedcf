"""Slurm at the command seam, built from the golden output of a real Slurm 22.05
(``tests/fixtures/slurm/``): :class:`GoldenReplay` answers exactly the captured commands,
:class:`FakeSlurm` keeps node states and jobs and answers with the captured documents and
Slurm's captured error words, so the runner's decisions are tested against what Slurm prints.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from reprofleet.scheduler import CommandResult
from tests.support.paths import FIXTURES

SLURM = FIXTURES / "slurm"


def golden(name: str) -> dict[str, Any]:
    """One captured step: command, as_user, rc, stdout, stderr, note."""
    return json.loads((SLURM / f"{name}.json").read_text())


def golden_nodes(name: str) -> list[dict[str, Any]]:
    return list(json.loads(golden(name)["stdout"])["nodes"])


class GoldenReplay:
    """Answers each captured command with its captured result; any other argv fails the test."""

    def __init__(self, *names: str) -> None:
        self.steps = {tuple(golden(n)["command"]): golden(n) for n in names}
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], timeout_s: float) -> CommandResult:
        key = tuple(argv)
        self.calls.append(key)
        step = self.steps.get(key)
        assert step is not None, f"a command no golden file captured: {key}"
        return CommandResult(key, step["rc"], step["stdout"], step["stderr"])


@dataclass
class FakeNode:
    name: str
    partitions: tuple[str, ...] = ("gpu",)
    state: str = "idle"
    flags: set[str] = field(default_factory=set)
    reason: str = ""
    jobs_until: float | None = None  # a user's job runs on it until this virtual time
    job_on_resume_s: float | None = None  # a pending job lands the moment it is resumed, for this long
    registers_at: float | None = None  # rebooted by scontrol reboot: its slurmd registers again at this time


class FakeSlurm:
    """A cluster of nodes at the command seam. ``now``: the virtual clock the jobs end by;
    ``denied``: the user is not an operator (every update refused with Slurm's words)."""

    JOB_LINE = golden("squeue_one_running")["stdout"].splitlines()[0]

    def __init__(self, now: Callable[[], float], *nodes: FakeNode, denied: bool = False,
                 config: str = "config_plain", reboot_program: Callable[[str], None] | None = None,
                 boot_s: float = 1.0) -> None:
        self.now = now
        self.nodes = {node.name: node for node in nodes}
        self.denied = denied
        self.config = config  # the golden ``scontrol show config`` this cluster answers with
        self.reboot_program = reboot_program  # the lab's RebootProgram, run by slurmctld (reboot_from_controller)
        self.boot_s = boot_s  # how long after RebootProgram the node's slurmd registers again
        self.reboots: list[tuple[str, ...]] = []
        self.calls: list[tuple[str, ...]] = []
        self.updates: list[tuple[str, ...]] = []
        self._document = json.loads(golden("sinfo_idle")["stdout"])
        self._template = self._document["nodes"][0]

    def __call__(self, argv: Sequence[str], timeout_s: float) -> CommandResult:
        key = tuple(argv)
        self.calls.append(key)
        if key == ("sinfo", "--json"):
            return self._ok(key, self._sinfo())
        if key[0] == "squeue":
            node = self.nodes[key[key.index("-w") + 1]]
            return self._ok(key, self.JOB_LINE + "\n" if self._busy(node) else "")
        if key[:2] == ("scontrol", "update"):
            return self._update(key)
        if key == ("scontrol", "show", "config"):
            return self._captured(key, self.config)
        if key[:2] == ("scontrol", "reboot"):
            return self._reboot(key)
        raise AssertionError(f"FakeSlurm was not taught {key}")

    def _ok(self, key: tuple[str, ...], stdout: str) -> CommandResult:
        return CommandResult(key, 0, stdout, "")

    def _captured(self, key: tuple[str, ...], name: str) -> CommandResult:
        step = golden(name)
        return CommandResult(key, step["rc"], step["stdout"], step["stderr"])

    def _busy(self, node: FakeNode) -> bool:
        return node.jobs_until is not None and self.now() < node.jobs_until and node.state != "down"

    def _sinfo(self) -> str:
        document = copy.deepcopy(self._document)
        document["nodes"] = [self._entry(node) for node in self.nodes.values()]
        return json.dumps(document)

    def _reboot(self, key: tuple[str, ...]) -> CommandResult:
        """As 22.05 did in reboot_asap_down.json and the sinfo after it: with reboot_from_controller,
        slurmctld runs RebootProgram at once; the node is down+DRAIN+REBOOT_ISSUED with
        `` : reboot issued`` appended, and once its slurmd registers, down (nextstate=DOWN), DRAIN
        cleared, `` : reboot complete`` appended. Without it, slurmd on the node would run it (a
        locked node runs nothing): nothing happens here."""
        node = self.nodes[key[-1]]
        words = dict(word.split("=", 1) for word in key[2:-1] if "=" in word)
        self.reboots.append(key)
        node.state, node.reason = "down", words.get("reason", "reboot requested") + " : reboot issued"
        node.flags |= {"DRAIN", "REBOOT_ISSUED"}
        if "reboot_from_controller" in golden(self.config)["stdout"] and self.reboot_program is not None:
            self.reboot_program(node.name)
            node.registers_at = self.now() + self.boot_s
        return self._captured(key, "reboot_asap_down")

    def _registered(self, node: FakeNode) -> None:
        if node.registers_at is not None and self.now() >= node.registers_at:
            node.registers_at = None
            node.flags -= {"DRAIN", "REBOOT_ISSUED"}
            node.reason += " : reboot complete"

    def _entry(self, node: FakeNode) -> dict[str, Any]:
        self._registered(node)
        entry = copy.deepcopy(self._template)
        state = node.state if node.state == "down" else ("mixed" if self._busy(node) else "idle")
        entry.update(name=node.name, state=state, state_flags=sorted(node.flags), reason=node.reason,
                     reason_set_by_user="root" if node.reason else None, partitions=list(node.partitions))
        return entry

    def _update(self, key: tuple[str, ...]) -> CommandResult:
        words = dict(word.split("=", 1) for word in key[2:])
        if self.denied:
            return self._captured(key, "drain_denied")
        node = self.nodes.get(words["nodename"])
        if node is None:
            return self._captured(key, "unknown_node")
        state = words["state"].lower()
        if state in ("drain", "down") and not words.get("reason"):
            return self._captured(key, "drain_no_reason")
        if state == "resume" and not (node.flags & {"DRAIN"} or node.state == "down"):
            return self._captured(key, "resume_idle")
        self.updates.append(key)
        if state == "drain":
            node.flags.add("DRAIN")
            node.reason = words["reason"]
        elif state == "down":
            node.state, node.reason = "down", words["reason"]
        elif state == "resume":
            node.state, node.reason = "idle", ""
            node.flags.discard("DRAIN")
            if node.job_on_resume_s is not None:
                node.jobs_until, node.job_on_resume_s = self.now() + node.job_on_resume_s, None
        return self._ok(key, "")

    def updates_of(self, name: str) -> list[str]:
        """The state words of each update that Slurm took for ``name`` (``drain``, ``down``, ``resume``)."""
        return [dict(w.split("=", 1) for w in k[2:])["state"] for k in self.updates if f"nodename={name}" in k]
