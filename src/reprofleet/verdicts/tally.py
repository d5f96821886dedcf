"""Records -> counts per cell and host, each outcome given its role by its own campaign.

A tally keeps every outcome's count (so reports can show them all), the role totals that
rates are made of, the errors and hangs *in* the phase at risk (a column of their own:
never clean, never a reproduction), why each excluded attempt is out of the rate, and the
slots that run again (interrupted, not run, cut), which are in no rate and no share: they
say nothing about the cell, and one quarantined host must not make every cell unjudgeable.
Cells are keyed by identity (name plus a hash of what ran), so one name with two contents
stays two rows.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from reprofleet.records.reader import RecordedAttempt
from reprofleet.model import Judging, Role

ALL_HOSTS = "(all)"
EMPTY_CACHE_MANIFEST = "e3b0c44298fc1c14"  # sha256 of no entries at all: the cache folder was empty


def natural_key(text: str) -> tuple[Any, ...]:
    """``ws2`` before ``ws10``: digits compare as numbers."""
    return tuple(int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text))


@dataclass
class Tally:
    """One cell on one host (or pooled): outcome counts and role totals."""

    cell_id: str
    host: str
    outcomes: Counter[str] = field(default_factory=Counter)
    reproductions: int = 0
    judged: int = 0  # reproductions + non-reproductions
    at_risk: int = 0  # errors and hangs inside the phase at risk, and attempts lost with the host there
    excluded: int = 0
    excluded_reasons: Counter[str] = field(default_factory=Counter)
    not_run: int = 0  # slots that run again: in no rate and no share
    not_run_reasons: Counter[str] = field(default_factory=Counter)
    early: int = 0  # reproductions before the phase at risk (counted, flagged)
    lost_at_risk: int = 0  # of ``at_risk``: infra attempts whose host was lost inside the phase at risk

    @property
    def total(self) -> int:
        """Attempts that ran: judged, failed at risk and excluded (never a slot that runs again)."""
        return self.judged + self.at_risk + self.excluded

    @property
    def clean(self) -> int:
        return self.judged - self.reproductions

    @property
    def excluded_share(self) -> float:
        return self.excluded / self.total if self.total else 0.0

    @property
    def counts(self) -> tuple[int, int]:
        """(reproductions, judged): what every test and interval is computed from."""
        return self.reproductions, self.judged

    def merged(self, other: "Tally") -> "Tally":
        """This tally and ``other`` together (a cell over some of its hosts)."""
        return Tally(self.cell_id or other.cell_id, ALL_HOSTS, self.outcomes + other.outcomes,
                     self.reproductions + other.reproductions, self.judged + other.judged,
                     self.at_risk + other.at_risk, self.excluded + other.excluded,
                     self.excluded_reasons + other.excluded_reasons, self.not_run + other.not_run,
                     self.not_run_reasons + other.not_run_reasons, self.early + other.early,
                     self.lost_at_risk + other.lost_at_risk)

    def add(self, outcome: str, role: Role, reason: str, early: bool = False) -> None:
        if role is Role.NOT_RUN:
            self.not_run += 1
            self.not_run_reasons[reason] += 1
            return
        self.outcomes[outcome] += 1
        if role is Role.EXCLUDED:
            self.excluded += 1
            self.excluded_reasons[reason] += 1
        elif role is Role.FAILED_AT_RISK:
            self.at_risk += 1
            self.lost_at_risk += outcome == "infra"
        else:
            self.judged += 1
            if role is Role.REPRODUCTION:
                self.reproductions += 1
                self.early += early


@dataclass(frozen=True)
class Judged:
    """One record with its role, ready to count."""

    record: RecordedAttempt
    cell_id: str
    host: str
    outcome: str
    role: Role
    reason: str
    early: bool = False

    @property
    def campaign(self) -> str:
        return self.record.campaign

    @property
    def first_in_boot(self) -> bool | None:
        value = self.record.attempt_in_boot
        return None if value is None or value < 1 else value == 1

    @property
    def cold_cache(self) -> bool | None:
        cache = self.record.cache
        return None if not cache else cache == EMPTY_CACHE_MANIFEST


def judge_records(records: Iterable[RecordedAttempt], judging_of: Callable[[RecordedAttempt], Judging],
                  strata: Mapping[str, str] | None = None) -> list[Judged]:
    """Each record with its role under ``judging_of(record)`` (its own campaign's rules), counted
    under its stratum (``strata``: attempt id -> identity, ``Pool.strata``; else its identity)."""
    out = []
    for record in records:
        verdict = record.classified(judging_of(record))
        out.append(Judged(record, (strata or {}).get(record.attempt, record.identity), record.host, record.outcome,
                          verdict.role, verdict.reason, verdict.early))
    return out


def tallies(judged: Iterable[Judged]) -> dict[tuple[str, str], Tally]:
    """Per (cell_id, host), plus (cell_id, ALL_HOSTS) pooled over every host."""
    table: dict[tuple[str, str], Tally] = defaultdict(lambda: Tally("", ""))
    for item in judged:
        for host in (item.host, ALL_HOSTS):
            tally = table[(item.cell_id, host)]
            tally.cell_id, tally.host = item.cell_id, host
            tally.add(item.outcome, item.role, item.reason, item.early)
    return dict(table)


def split_tally(judged: Iterable[Judged], cell_id: str, attribute: str) -> tuple[Tally, Tally] | None:
    """A cell's counts split on a yes/no attribute of its attempts (``first_in_boot``, ``cold_cache``)."""
    yes, no = Tally(cell_id, "yes"), Tally(cell_id, "no")
    for item in judged:
        if item.cell_id != cell_id:
            continue
        value = getattr(item, attribute)
        if value is None:
            continue
        (yes if value else no).add(item.outcome, item.role, item.reason, item.early)
    if not yes.judged or not no.judged:
        return None
    return yes, no
