"""What a campaign's counts mean and when a cell may stop: the playbook's judging settings."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, unique
from typing import Any, Mapping, Sequence

from reprofleet.model.outcomes import Outcome, Phase, Role
from reprofleet.model.phases import CAPTURE_NEXT_NOTE, PhasePosition, position
from reprofleet.model.reasons import slot_runs_again


DEFAULT_MAX_EXCLUDED_SHARE = 0.2
# "fixed" needs the rate ratio's upper bound below this; chosen by bench/fixed_ratio.py (README, Verdicts)
DEFAULT_FIXED_RATIO = 0.2


LOST_IN = "infra in"  # the reason of an attempt lost with the host inside the phase at risk


DEFAULT_REPRODUCTIONS: tuple["Outcome", ...] = (Outcome.WEDGE, Outcome.REBOOT)


@unique
class EarlyReproductions(str, Enum):
    """What a reproduction before the phase at risk counts as (the playbook's ``early_reproductions``)."""

    COUNT = "count"  # a reproduction, flagged in the verdict (the default: a frozen host is a fact)
    EXCLUDE = "exclude"  # out of the rate, with its reason (the freeze is taken as another bug)


@dataclass(frozen=True)
class Classified:
    """One attempt's role, why it is not in the rate (empty when it is), and whether it is a
    reproduction that came before the phase at risk."""

    role: Role
    reason: str = ""
    early: bool = False


@dataclass(frozen=True)
class Judging:
    """How a campaign's outcomes count. Written into the manifest; every report uses it.

    A watchdog reset of a locked host is a ``reboot``, so reboots count by default. Only an
    attempt that got *through* the phase at risk (for the seed: CUDA-graph capture) is a
    non-reproduction: a clean exit, or an ``error`` or ``hang`` after it. An error or hang
    *in* it is its own role (it may be the bug caught short of a freeze) and never clean;
    one before it (a broken image, a typo) is excluded, so six errors never read like a
    fix. "Before", "in" and "after" follow the engine's own phase order (``model.phases``); a
    stop right before capture with nothing printed between (``EDGE``: "after kernel warmup;
    capture starts next") counts as in it, in every cell alike.
    Without ``at_risk_phase`` errors and hangs are always excluded. ``infra`` is excluded,
    and a slot that runs again (interrupted, not run, cut) is in nothing at all.
    ``fixed_ratio``: "fixed" needs the rate ratio (cell / reference) bounded below it.
    """

    reproductions: tuple[Outcome, ...] = DEFAULT_REPRODUCTIONS
    at_risk_phase: Phase | None = None
    max_excluded_share: float = DEFAULT_MAX_EXCLUDED_SHARE  # above it a cell is "cannot judge"
    fixed_ratio: float = DEFAULT_FIXED_RATIO
    early_reproductions: EarlyReproductions = EarlyReproductions.COUNT

    def classify(self, outcome: "Outcome | str", last_phase: str | None = None,
                 phases: Sequence[str] | None = None, infra_reason: str | None = None, *,
                 orderly: str | None = None) -> Classified:
        """The role of one attempt, from its outcome, the phases it went through, (infra) the
        reason its record gives, and ``orderly``: who shut the host down in an orderly way
        during it, as :func:`~reprofleet.model.shutdown.orderly_shutdown` reads its forensics. A
        ``reboot`` or ``wedge`` that was a person's ``reboot`` or an upgrade's is no reproduction
        (records written before the agent said so still carry the evidence)."""
        outcome = Outcome(outcome)
        if orderly and outcome in (Outcome.REBOOT, Outcome.WEDGE):
            return Classified(Role.EXCLUDED, f"orderly reboot ({orderly}): not a reproduction")
        if outcome is Outcome.INFRA:
            if slot_runs_again(outcome.value, infra_reason):
                return Classified(Role.NOT_RUN, str(infra_reason)[:100])
            if self.at_risk_phase and position(last_phase, phases, self.at_risk_phase) is PhasePosition.IN:
                # the host was lost inside the phase at risk: it may be the bug, so never out of the
                # worst case (issue 33 item 2: 7 of 37 lost in capture made a cell "fixed")
                return Classified(Role.FAILED_AT_RISK, f"{LOST_IN} {self.at_risk_phase.value}: {str(infra_reason)[:80]}")
            return Classified(Role.EXCLUDED, f"infra: {str(infra_reason)[:100]}" if infra_reason
                              else "infra: could not be judged")
        where = position(last_phase, phases, self.at_risk_phase) if self.at_risk_phase else None
        risk = self.at_risk_phase.value if self.at_risk_phase else ""
        if outcome in self.reproductions:
            if where is not PhasePosition.BEFORE:
                return Classified(Role.REPRODUCTION)
            if self.early_reproductions is EarlyReproductions.EXCLUDE:
                return Classified(Role.EXCLUDED, f"{outcome.value} before {risk} (last phase "
                                  f"{last_phase or 'none'}; early_reproductions: exclude)")
            return Classified(Role.REPRODUCTION, early=True)
        if outcome is Outcome.CLEAN:
            return Classified(Role.NON_REPRODUCTION)
        if outcome is Outcome.POWER_LOSS:
            return Classified(Role.EXCLUDED, "power_loss: the host lost power by something other than this "
                              "controller (its power device read off); never a reproduction unless the playbook "
                              "lists power_loss in reproductions")
        if outcome not in (Outcome.ERROR, Outcome.HANG):
            return Classified(Role.EXCLUDED, f"{outcome.value}: not counted as a reproduction by this campaign")
        if where is None:
            return Classified(Role.EXCLUDED, f"{outcome.value}: no at_risk_phase set, so it says nothing about the bug")
        if where is PhasePosition.AFTER:
            return Classified(Role.NON_REPRODUCTION)
        if where is PhasePosition.IN:
            return Classified(Role.FAILED_AT_RISK, f"{outcome.value} in {risk}")
        if where is PhasePosition.EDGE:
            return Classified(Role.FAILED_AT_RISK, f"{outcome.value} at the start of {risk} ({CAPTURE_NEXT_NOTE}: "
                              "the log cannot tell before or inside, so it is taken as inside)")
        if where is PhasePosition.BEFORE:
            return Classified(Role.EXCLUDED, f"{outcome.value} before {risk} (last phase {last_phase or 'none'})")
        return Classified(Role.EXCLUDED, f"{outcome.value} at {last_phase}: its phases fit no engine start's order, "
                          f"so where it stopped relative to {risk} is unknown")

    def role(self, outcome: "Outcome | str", last_phase: str | None = None,
             phases: Sequence[str] | None = None, infra_reason: str | None = None, *,
             orderly: str | None = None) -> Role:
        return self.classify(outcome, last_phase, phases, infra_reason, orderly=orderly).role

    def exclusion_reason(self, outcome: "Outcome | str", last_phase: str | None = None,
                         phases: Sequence[str] | None = None, infra_reason: str | None = None, *,
                         orderly: str | None = None) -> str:
        """Why an attempt is not in the rate (for reports); empty when it is in."""
        return self.classify(outcome, last_phase, phases, infra_reason, orderly=orderly).reason

    def to_json(self) -> dict[str, Any]:
        return {"reproductions": [o.value for o in self.reproductions],
                "at_risk_phase": self.at_risk_phase.value if self.at_risk_phase else None,
                "max_excluded_share": self.max_excluded_share, "fixed_ratio": self.fixed_ratio,
                "early_reproductions": self.early_reproductions.value}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "Judging":
        """From a manifest; a manifest written before roles existed counted wedges only."""
        if not data:
            return cls(reproductions=(Outcome.WEDGE,))
        phase = data.get("at_risk_phase")
        return cls(reproductions=tuple(Outcome(o) for o in data.get("reproductions") or ("wedge",)),
                   at_risk_phase=Phase(phase) if phase else None,
                   max_excluded_share=float(data.get("max_excluded_share", DEFAULT_MAX_EXCLUDED_SHARE)),
                   fixed_ratio=float(data.get("fixed_ratio", DEFAULT_FIXED_RATIO)),
                   early_reproductions=EarlyReproductions(data.get("early_reproductions", "count")))


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
