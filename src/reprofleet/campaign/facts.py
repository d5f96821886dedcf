"""`invoke facts`: every host's facts, gathered in parallel; failures are data."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from reprofleet.campaign.settings import ControllerConfig
from reprofleet.inventory import load_inventory
from reprofleet.inventory.patterns import limited
from reprofleet.records.facts_cache import cache_facts
from reprofleet.remote.session import with_agent
from reprofleet.errors import ReprofleetError
from reprofleet.model import Host
from reprofleet.remote.transport import TransportSettings


@dataclass(frozen=True)
class FactsRequest:
    """``invoke facts``: which hosts, reached how, and where their facts are kept."""

    inventory: str
    config: ControllerConfig
    reports: Path  # facts are cached under reports/.facts/ (the preflight reads them)
    limit: str | None = None  # an Ansible host pattern
    accept_new: bool | None = None  # --accept-new-host-keys (None: the config's)

    def hosts(self) -> tuple[Host, ...]:
        """The inventory's hosts the limit chose (the inventory is read here)."""
        return limited(load_inventory(self.inventory), self.limit).hosts


def fleet_facts(request: FactsRequest) -> dict[str, dict[str, Any] | ReprofleetError]:
    """Every chosen host's facts (or its error), each host's kept for the next campaign's preflight."""
    results = collect_facts(request.hosts(), request.config.run_settings(request.accept_new))
    for name, value in results.items():
        if isinstance(value, dict):
            cache_facts(request.reports, name, value)
    return results


def collect_facts(hosts: Sequence[Host], settings: Any) -> dict[str, dict[str, Any] | ReprofleetError]:
    """Host name -> facts, or the error that host gave (one failing host stops nothing)."""
    transport: TransportSettings = settings.transport

    def one(host: Host) -> dict[str, Any] | ReprofleetError:
        return with_agent(host, transport, lambda agent: dict(agent.facts().as_json))

    with ThreadPoolExecutor(max_workers=max(1, min(16, len(hosts)))) as pool:
        return dict(zip((h.name for h in hosts), pool.map(one, hosts)))


def readiness_lines(plan: Any, settings: Any) -> tuple[list[str], bool]:
    """``--dry-run --check-hosts``: ask every host of the plan (its facts, nothing changed) for
    what its plan needs; one line per host, and whether every host can run."""
    from reprofleet.runner.gpu_policy import check_power_limits
    from reprofleet.runner.readiness import problems

    found = collect_facts(plan.hosts, settings)
    lines, ok = [], True
    for host in plan.hosts:
        facts = found[host.name]
        if isinstance(facts, ReprofleetError):
            lines.append(f"{host.name}: cannot be asked: {facts}")
            ok = False
            continue
        cells = [cell for cell, _ in plan.per_host[host.name]] or list(plan.playbook.cells)
        missing = problems(host, cells, facts) + check_power_limits(plan.playbook, host, facts)
        lines.append(f"{host.name}: ready" if not missing else f"{host.name}: cannot run: " + "; ".join(missing))
        ok = ok and not missing
    return lines, ok
