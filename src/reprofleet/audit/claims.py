"""A report's claims as the auditor reads them: the structured fields of ``report --json``.

The auditor checks what a report *claims*, and a claim's words are other people's to change,
so every check here reads structured fields: a verdict's kind, its counts, the hosts it
names (those it rests on, those it reproduced on, those it was compared on); a rate row's
counts per host; a search group's hosts and boundary level; a bisection's first good
version. The sentence is read for one thing only: whether it names a value (a campaign id,
a digest, a driver version) that the records show differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

# The verdict kinds, as ``report --json`` spells them (verdicts.VerdictKind's values; the
# auditor does not import the judge, so a renamed kind fails tests/unit/test_audit.py instead).
CLEAN_KINDS = frozenset({"fixed", "clean so far", "no difference shown"})  # "nothing reproduced here"
WORST_CASE_KINDS = frozenset({"fixed", "clean so far"})  # ... and what might have, is in its worst case
REPRODUCING_KINDS = frozenset({"reproduces", "host-specific"})  # "it reproduced on these hosts"
COMPARING_KINDS = frozenset({"fixed", "reproduces less often", "clean so far", "no difference shown"})
KINDS = CLEAN_KINDS | REPRODUCING_KINDS | COMPARING_KINDS | {"cannot judge"}


@dataclass(frozen=True)
class VerdictClaim:
    """One cell's verdict: what it says and every count and host it names."""

    cell: str
    cell_id: str
    kind: str
    text: str
    reference: bool
    reproductions: int
    judged: int
    excluded: int
    at_risk: int
    not_run: int
    hosts: tuple[str, ...]
    hosts_reproducing: tuple[str, ...]
    compared_hosts: tuple[str, ...]
    compared: bool  # it carries a comparison with the reference
    worst_case: bool = False  # it states a worst case (every attempt at risk counted as a reproduction)

    @property
    def name(self) -> str:
        return f"verdict {self.cell} ({self.kind})"


@dataclass(frozen=True)
class RateClaim:
    """One rate row: a cell on one host, with its counts."""

    cell: str
    cell_id: str
    host: str
    reproductions: int
    judged: int
    at_risk: int
    excluded: int

    @property
    def name(self) -> str:
        return f"rate {self.cell} on {self.host}"


@dataclass(frozen=True)
class SearchClaim:
    """A search group's "highest clean level": these hosts, every level up to ``boundary``."""

    campaign: str
    group: str
    hosts: tuple[str, ...]
    cells: tuple[str, ...]  # level -> its cell, in the model's order
    labels: tuple[str, ...]
    boundary: int | None

    @property
    def name(self) -> str:
        level = "none" if self.boundary is None else self.labels[self.boundary]
        return f"search group {self.group}: highest clean level {level}"


@dataclass(frozen=True)
class BisectClaim:
    """A bisection's "first good" version."""

    campaign: str
    cells: tuple[str, ...]
    labels: tuple[str, ...]
    first_good: int | None

    @property
    def name(self) -> str:
        return f"bisection: first good {'none' if self.first_good is None else self.labels[self.first_good]}"


@dataclass(frozen=True)
class Claims:
    verdicts: tuple[VerdictClaim, ...]
    rates: tuple[RateClaim, ...]
    searches: tuple[SearchClaim, ...]
    bisections: tuple[BisectClaim, ...]

    @property
    def count(self) -> int:
        return len(self.verdicts) + len(self.rates) + len(self.searches) + len(self.bisections)


def _names(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, Sequence) and not isinstance(value, str) else ()


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _verdict(data: Mapping[str, Any]) -> VerdictClaim:
    return VerdictClaim(str(data.get("cell")), str(data.get("cell_id")), str(data.get("verdict")),
                        str(data.get("text") or ""), bool(data.get("reference")), _int(data.get("reproductions")),
                        _int(data.get("judged")), _int(data.get("excluded")), _int(data.get("at_risk")),
                        _int(data.get("not_run")), _names(data.get("hosts")), _names(data.get("hosts_reproducing")),
                        _names(data.get("compared_hosts")), data.get("against_reference") is not None,
                        bool(data.get("worst_case")))


def _rate(data: Mapping[str, Any]) -> RateClaim | None:
    if data.get("host") is None:  # the pooled row: the verdict's own counts
        return None
    return RateClaim(str(data.get("cell")), str(data.get("cell_id")), str(data.get("host")),
                     _int(data.get("reproductions")), _int(data.get("judged")), _int(data.get("at_risk")),
                     _int(data.get("excluded")))


def _ladder(search: Mapping[str, Any]) -> tuple[tuple[SearchClaim, ...], tuple[BisectClaim, ...]]:
    campaign, cells, labels = str(search.get("campaign")), _names(search.get("cells")), _names(search.get("levels"))
    result = search.get("result")
    if search.get("kind") == "bisect" and isinstance(result, Mapping):
        first = result.get("first_good")
        return (), (BisectClaim(campaign, cells, labels, first if isinstance(first, int) else None),)
    groups = result if isinstance(result, Sequence) else ()
    return tuple(SearchClaim(campaign, str(g.get("group")), _names(g.get("hosts")), cells, labels,
                             g.get("boundary") if isinstance(g.get("boundary"), int) else None)
                 for g in groups if isinstance(g, Mapping)), ()


def claims_of(report: Mapping[str, Any]) -> Claims:
    """Every claim of one ``report --json`` document."""
    verdicts = tuple(_verdict(v) for v in report.get("verdicts") or () if isinstance(v, Mapping))
    rates = tuple(r for r in (_rate(d) for d in report.get("rates") or () if isinstance(d, Mapping)) if r)
    search = report.get("search")
    searches, bisections = _ladder(search) if isinstance(search, Mapping) else ((), ())
    return Claims(verdicts, rates, searches, bisections)
