"""`invoke facts`: every host's facts, gathered in parallel; failures are data."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping, Sequence

from rich.table import Table

from .agent_session import with_agent
from .errors import ReprofleetError
from .model import Host
from .transport import TransportSettings


def collect_facts(hosts: Sequence[Host], settings: Any) -> dict[str, dict[str, Any] | ReprofleetError]:
    """Host name -> facts, or the error that host gave (one failing host stops nothing)."""
    transport: TransportSettings = settings.transport

    def one(host: Host) -> dict[str, Any] | ReprofleetError:
        return with_agent(host, transport, lambda agent: agent.facts())

    with ThreadPoolExecutor(max_workers=max(1, min(16, len(hosts)))) as pool:
        return dict(zip((h.name for h in hosts), pool.map(one, hosts)))


def _gpu_line(facts: Mapping[str, Any]) -> str:
    gpus = facts.get("gpus") or []
    if not gpus:
        return f"no GPU via NVML ({facts.get('nvml')})"
    from .progress import shown

    first = gpus[0]
    limits = first.get("power_limit_w") or {}
    return (f"{len(gpus)}x {shown(first.get('name'))} vbios {shown(first.get('vbios'))} "
            f"pl {shown(limits.get('current'), 'W')} [{shown(limits.get('min'))}-{shown(limits.get('max'))}]")


def facts_table(results: Mapping[str, Mapping[str, Any] | ReprofleetError]) -> Table:
    from .progress import host_table, pair, shown

    def row(facts: Mapping[str, Any]) -> list[str]:
        dmi = facts.get("dmi") or {}
        journal = facts.get("journal_persistent")
        return [_gpu_line(facts), pair(facts.get("driver_version"), facts.get("cuda_driver_version")),
                shown(facts.get("kernel")), pair(dmi.get("board_name"), dmi.get("bios_version")),
                shown(facts.get("boot_id"))[:8],
                shown(None if journal is None else "persistent" if journal else "[yellow]volatile[/]")]

    return host_table("host facts", ("GPU", "driver / CUDA", "kernel", "board / BIOS", "boot_id", "journal"),
                      results, row)
