"""The campaign's lines as they are written, told to whoever watches a campaign from outside.

Notifications (``campaign/notify.py``) and the Prometheus textfile (``campaign/metrics.py``)
both want every event and every attempt line the moment it is on disk, and neither may ever
hold a host runner back or stop the campaign. So the campaign writes through the two
appenders here, which tell each :class:`Observer` after the line is fsync'd; an observer that
raises costs one ``warning`` event, never the campaign. The observers see only what the files
hold, so what they say always matches what a report reads later.
"""

from __future__ import annotations

import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Protocol, Sequence

from contextlib import contextmanager

from reprofleet.model import CampaignEvent, Host, Playbook
from reprofleet.records.store import AttemptLog, CampaignDir, JsonlAppender, utc_now


@dataclass(frozen=True)
class Watched:
    """The campaign an observer watches, as it starts (under its folder's lock)."""

    campaign_id: str
    directory: CampaignDir
    playbook: Playbook
    hosts: tuple[Host, ...]


@dataclass(frozen=True)
class Ended:
    """How the campaign ended, for the observers' last word."""

    interrupted: bool = False
    failure: str | None = None  # why it stopped on its own, or the error that ended run_campaign
    quarantined: Mapping[str, str] = field(default_factory=dict)


class Observer(Protocol):
    """What the campaign tells a watcher; each call must return quickly (queue slow work)."""

    def started(self, watched: Watched, log: "EventWriter") -> None: ...

    def on_event(self, entry: Mapping[str, Any]) -> None: ...

    def on_attempt_line(self, entry: Mapping[str, Any]) -> None: ...

    def finished(self, ended: Ended) -> None: ...


class EventWriter:
    """Appends an event that no observer is told about (an observer's own failure)."""

    def __init__(self, appender: JsonlAppender) -> None:
        self._appender = appender

    def __call__(self, host: str, what: CampaignEvent, **fields: Any) -> None:
        try:
            JsonlAppender.append(self._appender, {"t": utc_now(), "host": host, "event": what.value, **fields})
        except OSError:
            pass  # the campaign's own next event finds the disk full and stops it


class _Fanout:
    def __init__(self, observers: Sequence[Observer], log: EventWriter) -> None:
        self.observers = tuple(observers)
        self.log = log
        self._lock = threading.Lock()  # observers are told one line at a time, in file order

    def tell(self, method: str, *args: Any) -> None:
        with self._lock:
            for observer in self.observers:
                try:
                    getattr(observer, method)(*args)
                except Exception as exc:  # noqa: BLE001 - a watcher's bug never stops the campaign
                    self.log("", CampaignEvent.WARNING, message=f"{type(observer).__name__}.{method} failed: "
                             f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()[-2000:])


class _Told:
    """A log whose every line is told to the observers (method ``TELL``) once it is on disk."""

    TELL = ""
    fanout: _Fanout | None = None  # set once the watch starts

    def append(self, entry: dict[str, Any]) -> None:
        super().append(entry)  # type: ignore[misc]
        if self.fanout is not None:
            self.fanout.tell(self.TELL, entry)


class ObservedEvents(_Told, JsonlAppender):
    """events.jsonl, told line by line (``on_event``)."""

    TELL = "on_event"


class ObservedAttempts(_Told, AttemptLog):
    """attempts.jsonl, every record and amendment told (``on_attempt_line``)."""

    TELL = "on_attempt_line"


@dataclass
class Watch:
    """The two observed logs a campaign writes through, and how it ended (set before leaving)."""

    events: ObservedEvents
    attempt_log: ObservedAttempts
    ended: Ended | None = None


@contextmanager
def watching(watched: Watched, observers: Sequence[Observer]) -> Iterator[Watch]:
    """Open the campaign's two logs with ``observers`` told of every line; on leaving, each
    observer hears how the campaign ended (an exception out of the campaign: ``failure``)."""
    directory = watched.directory
    watch = Watch(ObservedEvents(directory.events), ObservedAttempts(directory.attempts))
    log = EventWriter(watch.events)
    fanout = _Fanout(observers, log)
    fanout.tell("started", watched, log)
    watch.events.fanout = watch.attempt_log.fanout = fanout
    try:
        yield watch
    except BaseException as exc:
        fanout.tell("finished", Ended(failure=f"{type(exc).__name__}: {exc}"))
        raise
    fanout.tell("finished", watch.ended or Ended())
