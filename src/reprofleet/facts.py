"""`invoke facts`: every host's facts, gathered in parallel; failures are data."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping, Sequence

from rich.table import Table

from .agent import AgentClient, load_bundle
from .errors import ReprofleetError
from .model import Host
from .transport import TransportSettings, connect


def host_facts(host: Host, transport: TransportSettings) -> dict[str, Any]:
    session = connect(host, transport)
    try:
        agent = AgentClient(session, load_bundle(), host.python)
        agent.push()
        return agent.facts()
    finally:
        session.close()


def collect_facts(hosts: Sequence[Host], settings: Any) -> dict[str, dict[str, Any] | ReprofleetError]:
    """Host name -> facts, or the error that host gave (one failing host stops nothing)."""
    transport: TransportSettings = settings.transport

    def one(host: Host) -> dict[str, Any] | ReprofleetError:
        try:
            return host_facts(host, transport)
        except ReprofleetError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=max(1, min(16, len(hosts)))) as pool:
        return dict(zip((h.name for h in hosts), pool.map(one, hosts)))


def _gpu_line(facts: Mapping[str, Any]) -> str:
    gpus = facts.get("gpus") or []
    if not gpus:
        return f"no GPU via NVML ({facts.get('nvml')})"
    first = gpus[0]
    limits = first.get("power_limit_w") or {}
    return (f"{len(gpus)}x {first.get('name')} vbios {first.get('vbios')} "
            f"pl {limits.get('current')}W [{limits.get('min')}-{limits.get('max')}]")


def facts_table(results: Mapping[str, Mapping[str, Any] | ReprofleetError]) -> Table:
    table = Table(title="host facts")
    for column in ("host", "GPU", "driver / CUDA", "kernel", "board / BIOS", "boot_id", "journal"):
        table.add_column(column)
    for name, facts in sorted(results.items()):
        if isinstance(facts, ReprofleetError):
            table.add_row(name, f"[red]{facts}[/]", "", "", "", "", "")
            continue
        dmi = facts.get("dmi") or {}
        table.add_row(
            name, _gpu_line(facts), f"{facts.get('driver_version')} / {facts.get('cuda_driver_version')}",
            str(facts.get("kernel")), f"{dmi.get('board_name')} / {dmi.get('bios_version')}",
            str(facts.get("boot_id"))[:8], "persistent" if facts.get("journal_persistent") else "[yellow]volatile[/]",
        )
    return table
