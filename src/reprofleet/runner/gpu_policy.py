"""GPU policies: apply, read back, verify, restore (through the host agent).

Policy is an experimental factor, so what goes into a record is what the GPU *reports*
after we asked, not what we asked. A policy that does not read back within tolerance makes
the attempt ``infra``: running it would attribute an outcome to the wrong setting.

An observe-only host (inventory ``gpu_policy: observe``) is one we do not own: ``apply``
and ``restore`` (the only paths to an ``nvidia-smi`` setter) refuse it before the agent is
asked, a cell that asks for a setting is refused for it before the campaign starts
(``refusals``), and its attempts carry the read-back of the card as its owner left it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from reprofleet.remote.agent import AgentClient
from reprofleet.errors import PolicyError
from reprofleet.model import Cell, GpuPolicy, Host, Playbook

CLOCK_TOLERANCE_MHZ = 15
POWER_TOLERANCE_W = 1.0


@dataclass(frozen=True)
class PolicyState:
    """A policy as applied on one host, with what the GPU reported back."""

    requested: GpuPolicy
    readback: Mapping[str, Any]


# A lock has no NVML getter: the P0 range and the driver's current clock range (the agent's
# ``*_freqs``, from nvmlDeviceGetCurrentClockFreqs) must both report it (collectors/gpu_policy.py).
LOCK_SECOND_READ = {"graphics_clocks": "graphics_clocks_freqs", "memory_clocks": "memory_clocks_freqs"}


def _off(got: Any, wanted: Any) -> bool:
    return not got or any(abs(int(g) - int(w)) > CLOCK_TOLERANCE_MHZ for g, w in zip(got, wanted))


def verify(requested: GpuPolicy, readback: Mapping[str, Any]) -> list[str]:
    """Differences between what was asked and what the GPU reports (empty = verified).

    A clock lock is verified only when two independent reads agree on it; one that cannot be
    told from no lock (the second read missing, or the two disagreeing) is a problem, so the
    attempt is ``infra`` with these words, never run under a lock nobody saw hold."""
    problems: list[str] = []
    for name in ("graphics_clocks", "memory_clocks", "application_clocks"):
        wanted = getattr(requested, name)
        if wanted is None:
            continue
        got = readback.get(name)
        if _off(got, wanted):
            problems.append(f"{name}: asked {list(wanted)}, GPU reports {got}")
            continue
        second = LOCK_SECOND_READ.get(name)
        if second is None:
            continue
        other = readback.get(second)
        if other is None:
            problems.append(f"{name}: the read-back cannot tell locked from unlocked: the P0 range reads {got}, "
                            f"and the driver's clock range ({second}) is unavailable to confirm it")
        elif _off(other, wanted):
            problems.append(f"{name}: the read-back cannot tell locked from unlocked: asked {list(wanted)}, the "
                            f"P0 range reads {got} but the driver's clock range ({second}) reads {other}")
    if requested.power_limit_w is not None:
        got = readback.get("power_limit_w")
        if got is None or abs(float(got) - requested.power_limit_w) > POWER_TOLERANCE_W:
            problems.append(f"power_limit_w: asked {requested.power_limit_w:g}, GPU reports {got}")
    if requested.persistence is not None and readback.get("persistence") is not requested.persistence:
        problems.append(f"persistence: asked {requested.persistence}, GPU reports {readback.get('persistence')}")
    return problems


SETTINGS = ("graphics_clocks", "memory_clocks", "application_clocks", "power_limit_w", "persistence")


def changed_since(applied: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """What differs between the read-back when the policy was applied and the one now.

    Checked before every attempt: a by-hand ``invoke policy --restore``, ``nvidia-smi -rgc``
    or another tool's lock would otherwise run attempts credited to the wrong cell. Every
    setting is compared, not only the ones the cell asks for: the default cell is a policy
    too (no lock), and a lock someone added under it changes what it measures.
    """
    changes: list[str] = []
    for name in SETTINGS:
        before, after = applied.get(name), now.get(name)
        if before == after:
            continue
        if name == "power_limit_w" and before is not None and after is not None:
            if abs(float(before) - float(after)) <= POWER_TOLERANCE_W:
                continue
        elif isinstance(before, (list, tuple)) and isinstance(after, (list, tuple)) and len(before) == len(after):
            if all(abs(int(a) - int(b)) <= CLOCK_TOLERANCE_MHZ for a, b in zip(after, before)):
                continue
        changes.append(f"{name}: was {before}, now {after}")
    return changes


def refusal(host: Host, cell: Cell) -> str | None:
    """Why ``cell`` may not run on ``host`` (one line naming both), or None."""
    if not host.observe_only or cell.gpu.is_default:
        return None
    asks = ", ".join(f"{name} {value}" for name, value in cell.gpu.as_dict().items())
    return (f"{host.name}: cell {cell.name!r} refused: the host is observe-only (gpu_policy: observe: no GPU "
            f"setting is ever changed there) and the cell asks {asks}")


def refusals(playbook: Playbook, hosts: tuple[Host, ...]) -> list[str]:
    """Every (host, cell) pair refused, one line each: the dry run and the preflight print them."""
    return [line for host in hosts for cell in playbook.cells if (line := refusal(host, cell)) is not None]


def _refuse_setters(host: Host, action: str) -> None:
    if host.observe_only:
        raise PolicyError(f"{host.name}: policy {action} refused: the host is observe-only (gpu_policy: observe), "
                          "no nvidia-smi setter runs there")


def apply(agent: AgentClient, host: Host, requested: GpuPolicy) -> PolicyState:
    """Apply ``requested`` (unset fields reset to the card default) and verify it."""
    _refuse_setters(host, "apply")
    report = agent.policy("apply", host.gpu_index, requested.as_dict())
    readback = dict(report.readback)
    problems = list(report.errors) + verify(requested, readback)
    if not report.ok or problems:
        raise PolicyError(f"{agent.host}: policy not applied: {'; '.join(map(str, problems)) or 'agent said not ok'}")
    return PolicyState(requested, readback)


def read(agent: AgentClient, gpu: int) -> Mapping[str, Any]:
    return dict(agent.policy("read", gpu).readback)


def restore(agent: AgentClient, host: Host) -> Mapping[str, Any]:
    """Put the card back to its defaults; returns the read-back after restoring."""
    _refuse_setters(host, "restore")
    report = agent.policy("restore", host.gpu_index)
    if not report.ok:
        raise PolicyError(f"{agent.host}: restore failed: {list(report.errors)}")
    return dict(report.readback)


def power_limit_range(host: Host, facts: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """The card's power-limit range: inventory override, else the host's (cached) facts."""
    override = host.vars.get("gpu_power_limits")
    if override:
        low, high = override
        return float(low), float(high)
    for gpu in (facts or {}).get("gpus") or []:
        if gpu.get("index") == host.gpu_index:
            limits = gpu.get("power_limit_w") or {}
            if limits.get("min") is not None and limits.get("max") is not None:
                return float(limits["min"]), float(limits["max"])
    return None


def cells_out_of_range(playbook: Playbook, host: Host,
                       facts: Mapping[str, Any] | None) -> list[tuple[Cell, float, float]]:
    """Cells whose power limit this host's card cannot take, with the card's range."""
    limits = power_limit_range(host, facts)
    if limits is None or host.observe_only:  # its policy cells are refused, not out of range
        return []
    low, high = limits
    return [(cell, low, high) for cell in playbook.cells
            if cell.gpu.power_limit_w is not None and not low <= cell.gpu.power_limit_w <= high]


def check_power_limits(playbook: Playbook, host: Host, facts: Mapping[str, Any] | None) -> list[str]:
    """The same, as messages (for a host whose facts were only learnt by connecting)."""
    return [f"{host.name}: cell {cell.name!r} asks power_limit {cell.gpu.power_limit_w:g} W, "
            f"outside the card's range {low:g}-{high:g} W"
            for cell, low, high in cells_out_of_range(playbook, host, facts)]
