"""Where one host's helpers say what happened: the campaign's events and its live view.

The per-host helpers (host_debug, netconsole, runtimes) are given this, not the runner, so
that what they can change is their own state and nothing else of the host's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from reprofleet.model.events import CampaignEvent


@dataclass(frozen=True)
class HostLog:
    """One host's event sink and progress line, with the host's name filled in."""

    host: str
    events: Callable[..., None]  # CampaignContext.event(host, what, **fields)
    live: Callable[..., None] = lambda host, **fields: None  # CampaignContext.progress(host, **fields)

    def event(self, what: CampaignEvent, **fields: Any) -> None:
        self.events(self.host, what, **fields)

    def progress(self, **fields: Any) -> None:
        self.live(self.host, **fields)
