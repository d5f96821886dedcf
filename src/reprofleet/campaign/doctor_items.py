"""What ``invoke doctor`` says of one item of one host: its status, what it found, and the fix.

Its own module so that the items of doctor.py and doctor_power.py are one type, with no
import between the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, unique


@unique
class Status(str, Enum):
    OK = "ok"
    MISSING = "missing"  # the plan cannot run here, or the campaign loses what it exists to record
    WARN = "warn"  # it runs, with less evidence or less margin
    UNKNOWN = "unknown"  # the host could not tell


@dataclass(frozen=True)
class Check:
    item: str
    status: Status
    found: str
    fix: str = ""

    def to_json(self) -> dict[str, str]:
        return {"item": self.item, "status": self.status.value, "found": self.found, "fix": self.fix}
