"""One by-hand agent session on one host: connect, push the agent, do one thing, close.

The by-hand tasks (facts, policy, cache push/pull) all work this way; a campaign keeps its
sessions open instead (host_runner). A host's failure is returned, not raised, so one host
that does not answer stops nothing for the others.
"""

from __future__ import annotations

from typing import Callable, TypeVar

from reprofleet.remote.agent import AgentClient, load_bundle
from reprofleet.errors import ReprofleetError
from reprofleet.model import Host
from reprofleet.remote.transport import TransportSettings, connect

T = TypeVar("T")


def with_agent(host: Host, transport: TransportSettings, work: Callable[[AgentClient], T]) -> T | ReprofleetError:
    """``work`` on one host's agent; a failure is returned (one host's problem), not raised."""
    try:
        session = connect(host, transport)
    except ReprofleetError as exc:
        return exc
    try:
        agent = AgentClient(session, load_bundle(), host.python)
        agent.push()
        return work(agent)
    except ReprofleetError as exc:
        return exc
    finally:
        session.close()
