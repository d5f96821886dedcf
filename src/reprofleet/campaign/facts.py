"""`invoke facts`: every host's facts, gathered in parallel; failures are data."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence


from reprofleet.remote.session import with_agent
from reprofleet.errors import ReprofleetError
from reprofleet.model import Host
from reprofleet.remote.transport import TransportSettings


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
