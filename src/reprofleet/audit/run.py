"""One report's claims against the records it came from: the auditor's one entry point.

``invoke report --audit`` calls :func:`audit_report` with the report's ``--json`` document
and the report's sources; so does report writing when ``REPROFLEET_AUDIT=1`` is set (the
test suite sets it, so every report a test writes is audited and a contradiction fails the
test that wrote it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from reprofleet.audit.checks import Contradiction, check_bisection, check_rate, check_search, check_verdict
from reprofleet.audit.claims import claims_of
from reprofleet.audit.evidence import read_evidence
from reprofleet.errors import ReprofleetError

AUDIT_ENV = "REPROFLEET_AUDIT"  # "1": every report written is audited, and a contradiction raises


class ContradictedReport(ReprofleetError):
    """A report claims what its own records contradict (one line per contradiction)."""


@dataclass(frozen=True)
class Audit:
    """What the auditor checked and what it found."""

    claims: int
    attempts: int
    contradictions: tuple[Contradiction, ...]

    @property
    def ok(self) -> bool:
        return not self.contradictions

    def lines(self) -> list[str]:
        """One line per contradiction, naming its claim; or one line saying none was found."""
        if self.ok:
            return [f"audit: {self.claims} claims checked against {self.attempts} attempts: no contradiction"]
        return [f"audit: contradicted: {c.line()}" for c in self.contradictions]

    def to_json(self) -> dict[str, Any]:
        return {"claims": self.claims, "attempts": self.attempts,
                "contradictions": [{"claim": c.claim, "shown": c.shown, "item": c.item} for c in self.contradictions]}


def audit_report(report: Mapping[str, Any], sources: Iterable[Path], reproductions: Iterable[str] = ()) -> Audit:
    """Every claim of ``report`` (a ``report --json`` document) against the records under
    ``sources``, read by the auditor's own code; ``reproductions``: the outcomes the report was
    told to count instead of the campaigns' own."""
    evidence = read_evidence(sources, reproductions)
    claims = claims_of(report)
    references = frozenset(v.cell_id for v in claims.verdicts if v.reference)
    found: list[Contradiction] = []
    for verdict in claims.verdicts:
        found += check_verdict(verdict, evidence, references)
    for rate in claims.rates:
        found += check_rate(rate, evidence)
    for search in claims.searches:
        found += check_search(search, evidence)
    for bisection in claims.bisections:
        found += check_bisection(bisection, evidence)
    return Audit(claims.count, len(evidence.attempts), tuple(found))


def auditing() -> bool:
    """Whether every report written is to be audited (``REPROFLEET_AUDIT=1``)."""
    return os.environ.get(AUDIT_ENV, "") not in ("", "0")


def require_consistent(audit: Audit, where: str) -> None:
    """Raise when the audit found a contradiction: the report at ``where`` must not stand unread."""
    if not audit.ok:
        raise ContradictedReport(f"{where}: the auditor found {len(audit.contradictions)} contradiction(s):\n"
                                 + "\n".join(audit.lines()))
