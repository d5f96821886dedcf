"""What a campaign folder already holds when a controller resumes it, read once.

A resume needs seven things of the folder: the attempts it recorded (their ids, each
host's records that count, for the stop tallies and the images cells ran), the slots it
started and on which host (a dead controller's attempts are recorded in turn), the hosts
that answered before (only those may be power-cycled at the start), the cells a stop rule
ended, the runtimes earlier controllers resolved, and the probe count of the last
``search_done`` told. :func:`read_history` reads attempts.jsonl and events.jsonl once each
into one :class:`CampaignHistory`; each thing above is a field or a method of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from reprofleet.model import Cell, Playbook
from reprofleet.model.events import CampaignEvent, event_of
from reprofleet.records.reader import RecordedAttempt, read_attempts
from reprofleet.records.store import CampaignDir, read_log_lines


@dataclass(frozen=True)
class StartedAttempt:
    """An ``attempt_started`` event: the slot an attempt ran and the host it ran on."""

    attempt: str
    host: str
    cell: str
    index: int


@dataclass(frozen=True)
class CampaignHistory:
    """A campaign folder as a resume reads it (see the module docstring)."""

    records: tuple[RecordedAttempt, ...] = ()  # attempts.jsonl, amendments folded, in file order
    started: tuple[StartedAttempt, ...] = ()  # in the order the attempts started
    # hosts that were prepared or started an attempt: only those may be cycled at a resume's start
    # (a record is no proof: a host that never answered has ``not run`` records for every slot)
    seen_alive: frozenset[str] = frozenset()
    stopped: frozenset[tuple[str, str]] = frozenset()  # (host, cell) pairs a stop rule ended
    resolved: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)  # host -> runtime_resolved events
    # the probe count of the last ``search_done`` told (None: none): a resume of a finished search
    # that runs nothing new must not tell it again
    search_done_probes: int | None = None
    others: frozenset[str] = frozenset()  # ids of records :meth:`keeping` left out (recorded all the same)

    def recorded_ids(self) -> set[str]:
        """Attempt ids already in attempts.jsonl (a dead controller's attempt is recorded once)."""
        return {record.attempt for record in self.records} | self.others

    def keeping(self, belongs: Callable[[RecordedAttempt], bool]) -> "CampaignHistory":
        """This history with only the records that ``belongs`` to the plan (a resume that changed
        a cell's factors or the PoC: the records of the cell's earlier identity no longer count for
        its plan, its stop tallies or a search); every record's id stays recorded."""
        kept = tuple(record for record in self.records if belongs(record))
        left = frozenset(record.attempt for record in self.records if not belongs(record))
        return replace(self, records=kept, others=self.others | left)

    def counting(self) -> tuple[RecordedAttempt, ...]:
        """The records that count: an interrupted or never-run slot runs again and counts for nothing."""
        return tuple(record for record in self.records if not record.runs_again)

    def earlier(self) -> dict[str, list[RecordedAttempt]]:
        """Each host's records that count (a resume rebuilds its stop tallies from them)."""
        by_host: dict[str, list[RecordedAttempt]] = {}
        for record in self.counting():
            by_host.setdefault(record.host, []).append(record)
        return by_host

    def completed_counts(self) -> dict[tuple[str, str], int]:
        """Attempts per (host, cell) already done; the plan skips that many of each."""
        counts: dict[tuple[str, str], int] = {}
        for record in self.counting():
            key = (record.host, record.cell)
            counts[key] = counts.get(key, 0) + 1
        return counts

    def started_on(self) -> dict[str, str]:
        """Attempt id -> the host it started on, in the order they started."""
        return {started.attempt: started.host for started in self.started}

    def started_slots(self, playbook: Playbook) -> dict[str, tuple[Cell, int]]:
        """Attempt id -> (cell, attempt index), for every started attempt of a cell the playbook has."""
        cells = {cell.name: cell for cell in playbook.cells}
        return {started.attempt: (cells[started.cell], started.index) for started in self.started
                if started.cell in cells}

    def stopped_on(self, host: str) -> set[str]:
        return {cell for where, cell in self.stopped if where == host}

    def resolved_on(self, host: str) -> list[Mapping[str, Any]]:
        """``host``'s ``runtime_resolved`` events of earlier controllers, in order."""
        return list(self.resolved.get(host, ()))


def read_history(directory: CampaignDir) -> CampaignHistory:
    """attempts.jsonl and events.jsonl, each read once (a torn last line of either is skipped)."""
    return history_of(read_attempts(directory.attempts), read_log_lines(directory.events))


def history_of(records: Sequence[RecordedAttempt], events: Sequence[Mapping[str, Any]]) -> CampaignHistory:
    """The history of these records and these events.jsonl lines (pure)."""
    started: list[StartedAttempt] = []
    alive: set[str] = set()
    stopped: set[tuple[str, str]] = set()
    resolved: dict[str, list[Mapping[str, Any]]] = {}
    told: int | None = None
    for entry in events:
        event, host = event_of(entry), str(entry.get("host"))
        if event is CampaignEvent.ATTEMPT_STARTED:
            started.append(StartedAttempt(str(entry.get("attempt")), host, str(entry.get("cell")),
                                          _index(entry.get("index"))))
        if event in (CampaignEvent.PREPARED, CampaignEvent.ATTEMPT_STARTED):
            alive.add(host)
        elif event is CampaignEvent.STOPPED:
            stopped.add((host, str(entry.get("cell"))))
        elif event is CampaignEvent.RESUME_CHANGED:  # a stop ended a cell's earlier identity, not its new one
            renewed = {str(name) for name in entry.get("new_identity") or ()}
            stopped = {(where, cell) for where, cell in stopped if cell not in renewed}
        elif event is CampaignEvent.RUNTIME_RESOLVED:
            resolved.setdefault(host, []).append(dict(entry))
        elif event is CampaignEvent.SEARCH_DONE and isinstance(entry.get("probes"), int):
            told = int(entry["probes"])
    return CampaignHistory(tuple(records), tuple(started), frozenset(alive), frozenset(stopped),
                           {host: tuple(lines) for host, lines in resolved.items()}, told)


def _index(value: Any) -> int:
    """An event's attempt index; 0 when it has none (an event older than the index)."""
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0
