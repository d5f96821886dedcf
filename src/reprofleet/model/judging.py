"""What a campaign's counts mean and when a cell may stop: the playbook's judging settings."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, unique
from typing import Any, Mapping

from reprofleet.model.outcomes import Outcome, Phase, Role, phase_reached


DEFAULT_MAX_EXCLUDED_SHARE = 0.2


DEFAULT_REPRODUCTIONS: tuple["Outcome", ...] = (Outcome.WEDGE, Outcome.REBOOT)


@dataclass(frozen=True)
class Judging:
    """How a campaign's outcomes count. Written into the manifest; every report uses it.

    A watchdog reset of a locked host is a ``reboot``, so reboots count by default. An
    ``error`` or ``hang`` says something about the bug only when the attempt reached the
    phase at risk (for the seed: CUDA-graph capture); before it (a broken image, a typo)
    it is excluded, so six errors never read like a fix. Without ``at_risk_phase`` they are
    always excluded. ``infra`` is always excluded.
    """

    reproductions: tuple[Outcome, ...] = DEFAULT_REPRODUCTIONS
    at_risk_phase: Phase | None = None
    max_excluded_share: float = DEFAULT_MAX_EXCLUDED_SHARE  # above it a cell is "cannot judge"

    def role(self, outcome: "Outcome | str", last_phase: str | None = None) -> Role:
        outcome = Outcome(outcome)
        if outcome is Outcome.INFRA:
            return Role.EXCLUDED
        if outcome in self.reproductions:
            return Role.REPRODUCTION
        if outcome is Outcome.CLEAN:
            return Role.NON_REPRODUCTION
        if outcome in (Outcome.ERROR, Outcome.HANG) and self.at_risk_phase is not None \
                and phase_reached(last_phase, self.at_risk_phase):
            return Role.NON_REPRODUCTION
        return Role.EXCLUDED

    def exclusion_reason(self, outcome: "Outcome | str", last_phase: str | None = None) -> str:
        """Why an excluded attempt is not in the rate (for reports); empty when it is in."""
        outcome = Outcome(outcome)
        if self.role(outcome, last_phase) is not Role.EXCLUDED:
            return ""
        if outcome is Outcome.INFRA:
            return "infra: could not be judged"
        if outcome in (Outcome.ERROR, Outcome.HANG):
            if self.at_risk_phase is None:
                return f"{outcome.value}: no at_risk_phase set, so it says nothing about the bug"
            return f"{outcome.value} before {self.at_risk_phase.value} (last phase {last_phase or 'none'})"
        return f"{outcome.value}: not counted as a reproduction by this campaign"

    def to_json(self) -> dict[str, Any]:
        return {"reproductions": [o.value for o in self.reproductions],
                "at_risk_phase": self.at_risk_phase.value if self.at_risk_phase else None,
                "max_excluded_share": self.max_excluded_share}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "Judging":
        """From a manifest; a manifest written before roles existed counted wedges only."""
        if not data:
            return cls(reproductions=(Outcome.WEDGE,))
        phase = data.get("at_risk_phase")
        return cls(reproductions=tuple(Outcome(o) for o in data.get("reproductions") or ("wedge",)),
                   at_risk_phase=Phase(phase) if phase else None,
                   max_excluded_share=float(data.get("max_excluded_share", DEFAULT_MAX_EXCLUDED_SHARE)))


@unique
class StopKind(str, Enum):
    """When a cell may stop before its planned attempts (a playbook's ``stop:``)."""

    FIXED_N = "fixed_n"  # run every planned attempt (the default)
    FIRST_REPRODUCTION = "first_reproduction"  # stop at the first reproduction, or once clean runs rule out the reference
    SPRT = "sprt"  # Wald's sequential probability ratio test, capped at 3x the fixed-n design


@dataclass(frozen=True)
class StopRule:
    """A stopping rule. For SPRT, H0 is "the bug is there" (rate ``p0``) and H1 is "fixed"
    (rate ``p1`` < ``p0``): ``alpha`` bounds a false "fixed", ``beta`` a false "still reproduces"."""

    kind: StopKind = StopKind.FIXED_N
    p0: float | None = None
    p1: float | None = None
    alpha: float = 0.05
    beta: float = 0.2
    confidence: float = 0.95  # first_reproduction: the level at which clean runs rule out the reference

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value}
        if self.kind is StopKind.SPRT:
            out.update(p0=self.p0, p1=self.p1, alpha=self.alpha, beta=self.beta)
        elif self.kind is StopKind.FIRST_REPRODUCTION:
            out.update(confidence=self.confidence)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "StopRule":
        if not data:
            return cls()
        return cls(kind=StopKind(data.get("kind", "fixed_n")), p0=data.get("p0"), p1=data.get("p1"),
                   alpha=float(data.get("alpha", 0.05)), beta=float(data.get("beta", 0.2)),
                   confidence=float(data.get("confidence", 0.95)))
