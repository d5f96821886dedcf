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


