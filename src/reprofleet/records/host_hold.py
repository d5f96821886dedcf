"""What this campaign's own files say about a host that is silent at a resume's start: when
this campaign last held it, and what it last did to its power (issue 32 items 6 and 8).

A host's lease lives on the host, so a silent host's lease cannot be read. Two facts from the
campaign's own folder stand in for it:

- **held last**: the newest line of this campaign's events.jsonl that only a lease holder
  writes (the host prepared, an attempt started or resumed on it, a wedge, reboot or recovery
  of it) and of its power.jsonl (a switch it made). A lease lapses ``lease TTL`` after its
  last renewal, and a live controller renews it between attempts; so while this campaign held
  the host less than a TTL ago, no other campaign can have taken it since.
- **switched last**: the newest switching action of power.jsonl on the host. An "on" (or a
  cycle) less than a boot deadline ago is a boot in progress that this campaign started: it
  is waited for before anything else is decided.

Pure functions over the lines as read (times are epoch seconds, compared with the clock the
caller injects).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Mapping

from reprofleet.model.events import CampaignEvent, event_of

__all__ = ["HOLDER_EVENTS", "OwnSwitch", "epoch_of", "held_last", "last_switch"]

# events only a controller that holds the host's lease writes about it
HOLDER_EVENTS = frozenset({CampaignEvent.PREPARED, CampaignEvent.ATTEMPT_STARTED, CampaignEvent.ATTEMPT_RESUMED,
                           CampaignEvent.WEDGE, CampaignEvent.REBOOT, CampaignEvent.RECOVERY,
                           CampaignEvent.SWITCHED_ON_AT_START, CampaignEvent.POWER_LOST})
SWITCHING = ("on", "off", "cycle")


@dataclass(frozen=True)
class OwnSwitch:
    """This campaign's newest switching action on a host's outlet."""

    action: str  # on | off | cycle
    at: float  # epoch seconds, when the action started
    ok: bool  # the device said it was done


def epoch_of(stamp: Any) -> float | None:
    """An ISO 8601 time of our logs as epoch seconds; None for a line without a readable one."""
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def last_switch(power_rows: Iterable[Mapping[str, Any]], host: str) -> OwnSwitch | None:
    """The newest switching action power.jsonl logged on ``host`` (None: never switched)."""
    newest: OwnSwitch | None = None
    for row in power_rows:
        at = epoch_of(row.get("time"))
        if row.get("host") != host or row.get("action") not in SWITCHING or at is None:
            continue
        if newest is None or at >= newest.at:
            newest = OwnSwitch(str(row["action"]), at, row.get("result") == "ok")
    return newest


def held_last(events: Iterable[Mapping[str, Any]], power_rows: Iterable[Mapping[str, Any]],
              host: str) -> float | None:
    """When this campaign last showed it held ``host`` (epoch seconds; None: never)."""
    times = [epoch_of(entry.get("t")) for entry in events
             if entry.get("host") == host and event_of(entry) in HOLDER_EVENTS]
    switched = last_switch(power_rows, host)
    times.append(switched.at if switched is not None else None)
    known = [at for at in times if at is not None]
    return max(known) if known else None
