"""Records -> counts per cell and host, each outcome given its role by its own campaign.

A tally keeps every outcome's count (so reports can show them all), the role totals that
rates are made of, and why each excluded attempt is out of the rate. Cells are keyed by
identity (name plus a hash of what ran), so one name with two contents stays two rows.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from reprofleet.records.identity import record_cell_id
from reprofleet.model import Judging, Outcome, Role

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
    excluded: int = 0
    excluded_reasons: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return self.judged + self.excluded

    @property
    def excluded_share(self) -> float:
        return self.excluded / self.total if self.total else 0.0

    @property
    def counts(self) -> tuple[int, int]:
        """(reproductions, judged): what every test and interval is computed from."""
        return self.reproductions, self.judged

    def add(self, outcome: str, role: Role, reason: str) -> None:
        self.outcomes[outcome] += 1
        if role is Role.EXCLUDED:
            self.excluded += 1
            self.excluded_reasons[reason] += 1
            return
        self.judged += 1
        if role is Role.REPRODUCTION:
            self.reproductions += 1


@dataclass(frozen=True)
class Judged:
    """One record with its role, ready to count."""

    record: Mapping[str, Any]
    cell_id: str
    host: str
    outcome: str
    role: Role
    reason: str

    @property
    def first_in_boot(self) -> bool | None:
        value = self.record.get("attempt_in_boot")
        return None if not isinstance(value, int) or value < 1 else value == 1

    @property
    def cold_cache(self) -> bool | None:
        cache = self.record.get("cache")
        return None if not cache else cache == EMPTY_CACHE_MANIFEST


def judge_records(records: Iterable[Mapping[str, Any]], judging_of: Any) -> list[Judged]:
    """Each record with its role under ``judging_of(record)`` (its own campaign's rules)."""
    out = []
    for record in records:
        judging: Judging = judging_of(record)
        outcome = str(record.get("outcome"))
        phase = record.get("last_phase")
        role = judging.role(Outcome(outcome), phase)
        reason = judging.exclusion_reason(Outcome(outcome), phase)
        if outcome == Outcome.INFRA.value and record.get("reason"):
            reason = f"infra: {str(record['reason'])[:100]}"
        out.append(Judged(record, record_cell_id(record), str(record.get("host")), outcome, role, reason))
    return out


def tallies(judged: Iterable[Judged]) -> dict[tuple[str, str], Tally]:
    """Per (cell_id, host), plus (cell_id, ALL_HOSTS) pooled over every host."""
    table: dict[tuple[str, str], Tally] = defaultdict(lambda: Tally("", ""))
    for item in judged:
        for host in (item.host, ALL_HOSTS):
            tally = table[(item.cell_id, host)]
            tally.cell_id, tally.host = item.cell_id, host
            tally.add(item.outcome, item.role, item.reason)
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
        (yes if value else no).add(item.outcome, item.role, item.reason)
    if not yes.judged or not no.judged:
        return None
    return yes, no
