"""The health gate: a host that came back from a wedge rejoins only with its GPU still there.

A wedge can take the GPU off the bus, and a power cycle does not always bring it back
(shared/REAL-LABS.md). Such a host boots, answers SSH and runs the agent, so without this
gate it rejoins and every later attempt on it fails as an ``error`` credited to its cell:
the host's broken card would read as the bug's effect. After recovery has the host stable
and its forensics read, the agent's ``health`` (collectors/gpu_health.py) asks three
independent witnesses (NVML, the PCI config space, nvidia-smi); the facts from before the
wedge say where the GPU was (its bus id) and how many GPUs NVML listed, so a GPU that
vanished and let the next one take its index is caught too.

A failed check quarantines the host, with the failing checks' words in the wedge record's
forensics (``gpu_health``) and in the reason. A health call that does not complete is a
failure as well: NVML can hang on a GPU stuck in its driver, and a host whose card cannot
be asked must not run attempts. A check that could not run on that host (no NVML binding,
no PCI tree, no nvidia-smi) is neither: the others decide.

Pure but for :func:`check`, which makes the one agent call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from reprofleet.errors import ReprofleetError
from reprofleet.model import frozen_mapping
from reprofleet.remote.agent import AgentClient
from reprofleet.remote.replies import HealthReply

FELL_OFF = "the GPU fell off the bus after {after} ({what}): power the host off and on by hand or reseat; quarantined"
UNUSABLE = "the GPU cannot be used after {after} ({what}): look at the host by hand; quarantined"
UNASKED = "the GPU could not be checked after {after} ({error}): look at the host by hand; quarantined"


@dataclass(frozen=True)
class GateVerdict:
    """Whether the host may rejoin; ``reason`` is its quarantine reason when it may not, and
    ``forensics`` what the wedge record keeps as ``gpu_health``."""

    healthy: bool
    reason: str | None = None
    forensics: Mapping[str, Any] = field(default_factory=frozen_mapping)


def expected_gpu(facts: Mapping[str, Any] | None, gpu_index: int) -> tuple[str | None, int | None]:
    """Where the GPU was before the wedge: its bus id, and how many GPUs NVML listed (None
    for what the facts did not say)."""
    if not facts or facts.get("nvml") != "ok":
        return None, None
    gpus = [g for g in facts.get("gpus") or [] if isinstance(g, Mapping)]
    mine = next((g for g in gpus if g.get("index") == gpu_index and not g.get("error")), None)
    bus = mine.get("pci_bus_id") if mine else None
    return (bus if isinstance(bus, str) and bus else None), len(gpus)


def judge(reply: HealthReply, after: str = "the wedge") -> GateVerdict:
    """The gate's decision from one ``health`` reply."""
    failed = reply.failed
    forensics = {"ok": not failed, "lost": reply.lost, "bus_id": reply.bus_id,
                 "checks": [check.as_json() for check in reply.checks],
                 "failed": [f"{check.name}: {check.words}" for check in failed]}
    if not failed:
        return GateVerdict(True, None, frozen_mapping(forensics))
    what = ", ".join(check.short for check in failed)
    template = FELL_OFF if reply.lost else UNUSABLE
    return GateVerdict(False, template.format(after=after, what=what), frozen_mapping(forensics))


def check(agent: AgentClient, gpu_index: int, facts: Mapping[str, Any] | None,
          after: str = "the wedge") -> GateVerdict:
    """Ask the host's agent, judge the answer; a call that fails is a failed gate."""
    bus_id, count = expected_gpu(facts, gpu_index)
    try:
        reply = agent.health(gpu_index, bus_id=bus_id, expect_gpus=count)
    except ReprofleetError as exc:
        forensics = {"ok": False, "lost": False, "bus_id": bus_id, "checks": [], "error": str(exc),
                     "failed": [f"health: {exc}"]}
        return GateVerdict(False, UNASKED.format(after=after, error=exc), frozen_mapping(forensics))
    return judge(reply, after)
