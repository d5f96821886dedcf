"""`invoke policy`: read or restore every host's GPU policy, outside a campaign.

The restore path is the one a user reaches for after a controller crash left GPUs locked:
every host in parallel, failures reported per host.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping

from rich.table import Table

from . import host_debug, policy
from .agent import AgentClient
from .agent_session import with_agent
from .errors import ReprofleetError
from .inventory import load_inventory
from .model import Host


def _one(host: Host, settings: Any, action: str) -> dict[str, Any] | ReprofleetError:
    def work(agent: AgentClient) -> dict[str, Any]:
        readback = policy.restore(agent, host.gpu_index) if action == "restore" else policy.read(agent, host.gpu_index)
        # the lockup-to-panic sysctls too: one more agent call, and a killed campaign leaves them set
        sysctls = host_debug.restore(agent) if action == "restore" else host_debug.read(agent)
        return {**readback, "host_debug": dict(sysctls)}

    return with_agent(host, settings.transport, work)


def policy_everywhere(inventory_path: str, settings: Any, action: str) -> dict[str, dict[str, Any] | ReprofleetError]:
    hosts = load_inventory(inventory_path).hosts
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(hosts)))) as pool:
        return dict(zip((h.name for h in hosts), pool.map(lambda h: _one(h, settings, action), hosts)))


def policy_table(results: Mapping[str, Mapping[str, Any] | ReprofleetError]) -> Table:
    from .progress import host_table, shown

    def row(readback: Mapping[str, Any]) -> list[str]:
        return [shown(readback.get("graphics_clocks")), shown(readback.get("memory_clocks")),
                shown(readback.get("power_limit_w"), " W"), shown(readback.get("persistence")),
                shown(readback.get("application_clocks")), _panics(readback.get("host_debug"))]

    return host_table("GPU policy (read back through NVML)",
                      ("graphics clocks", "memory clocks", "power limit", "persistence", "app clocks",
                       "kernel (host_debug)"), results, row)


def _panics(sysctls: Mapping[str, Any] | None) -> str:
    """``softlockup_panic=1 panic=10``: the lockup-to-panic sysctls that are on (``off`` when none)."""
    from .progress import shown

    if not sysctls:
        return shown(None)
    on = [f"{name}={value}" for name, value in sysctls.items() if value]
    return " ".join(on) or "off"
