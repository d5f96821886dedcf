"""A host that broke mid-campaign (a driver gone, a disk full, docker dead) fails every attempt
the same way in seconds: after ``infra_streak`` infra records in a row for one reason it is
quarantined with that reason, its remaining slots ``not run``, instead of burning its plan.
"""

from __future__ import annotations

import re

from reprofleet.model import Outcome, Record
from reprofleet.model.reasons import reason_code

__all__ = ["InfraStreak", "reason_shape"]


class InfraStreak:
    """The shapes of one host's last infra reasons in a row."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.shapes: list[str] = []

    def note(self, record: Record, refused: bool = False) -> str | None:
        """Count ``record``; the quarantine reason once the streak reaches the limit (else None).
        Slots that run again (interrupted, not run) neither extend nor break the streak, except a
        start the agent refused (``refused``: another attempt still holds the GPU): nothing ran,
        and a host whose old attempt never dies would refuse every slot in milliseconds."""
        if record.outcome is not Outcome.INFRA:
            self.shapes = []
            return None
        if reason_code(record.reason).runs_again_on_resume and not refused:
            return None
        key = reason_shape(record.reason)
        self.shapes = [*self.shapes, key] if self.shapes and self.shapes[-1] == key else [key]
        if 0 < self.limit <= len(self.shapes):
            return f"{len(self.shapes)} attempts in a row were infra for the same reason: {record.reason}"
        return None


def reason_shape(reason: str | None) -> str:
    """A reason without what differs between attempts (ids, numbers, durations): two
    ``cannot prepare the cache /x/fresh-<id>: No space left`` are one reason."""
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<id>", reason or "")
    return re.sub(r"\d+(\.\d+)?", "<n>", text)
