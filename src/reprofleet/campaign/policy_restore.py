"""`invoke policy`: read or restore every host's GPU policy, outside a campaign.

The restore path is the one a user reaches for after a controller crash left GPUs locked:
every host in parallel, failures reported per host.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any


from reprofleet.runner import host_debug, gpu_policy as policy
from reprofleet.remote.agent import AgentClient
from reprofleet.remote.session import with_agent
from reprofleet.errors import ReprofleetError
from reprofleet.inventory import load_inventory
from reprofleet.inventory.patterns import limited
from reprofleet.model import Host


def _one(host: Host, settings: Any, action: str, ignore_lease: bool) -> dict[str, Any] | ReprofleetError:
    def work(agent: AgentClient) -> dict[str, Any]:
        agent.ignore_lease = ignore_lease  # else a host a live campaign holds refuses (HostLeased)
        gpu_restore = action == "restore" and not host.observe_only  # an observe-only card is only read
        readback = policy.restore(agent, host) if gpu_restore else policy.read(agent, host.gpu_index)
        # the lockup-to-panic sysctls too: one more agent call, and a killed campaign leaves them set
        sysctls = host_debug.restore(agent) if action == "restore" else host_debug.read(agent)
        result = {**readback, "host_debug": dict(sysctls)}
        if action == "restore" and host.observe_only:
            result["gpu_policy"] = "observe-only (gpu_policy: observe): the GPU was read, never set"
        if action == "restore":  # and netconsole aimed at a controller that may be gone (a no-op when unset)
            report = agent.netconsole(["restore"])
            result["netconsole"] = "restored" if report.ok else f"restore failed: {'; '.join(map(str, report.errors))}"
        return result

    return with_agent(host, settings.transport, work)


def policy_everywhere(inventory_path: str, settings: Any, action: str,
                      ignore_lease: bool = False, limit: str | None = None) -> dict[str, dict[str, Any] | ReprofleetError]:
    """``limit``: an Ansible host pattern (``--limit``) choosing which of the inventory's hosts."""
    hosts = limited(load_inventory(inventory_path), limit).hosts
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(hosts)))) as pool:
        return dict(zip((h.name for h in hosts), pool.map(lambda h: _one(h, settings, action, ignore_lease), hosts)))




def policy_json(host: str, action: str, result: dict[str, Any] | Exception) -> dict[str, Any]:
    """One line of ``invoke policy --json`` (docs/schema/policy.schema.json): what the host's
    GPU and sysctls read (after a restore: read back), or why the host could not say."""
    if isinstance(result, Exception):
        return {"host": host, "action": action, "ok": False, "policy": None, "error": str(result)}
    return {"host": host, "action": action, "ok": True, "policy": dict(result), "error": None}
