"""The reasons a campaign writes on the nodes it takes, and how it knows its own again.

LBNL NHC's rule, ours too: a node is given back only when its reason carries our prefix and
this campaign's id (``reprofleet:<campaign> ...``); a node someone else drained (any other
reason) is never resumed by us. Text that came from a host (a phase name) is hostile input:
:func:`clean_text` keeps it to a bounded set of plain characters before it reaches scontrol.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["REASON_PREFIX", "NodeReasons", "clean_text"]

REASON_PREFIX = "reprofleet:"
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-/@+")


def clean_text(text: object, limit: int = 64) -> str:
    """``text`` with anything but letters, digits and ``_.-/@+`` made ``?``, cut to ``limit``
    characters: no newline, quote, ``=`` or control byte reaches a Slurm reason."""
    words = str(text)[:limit]
    cleaned = "".join(char if char in _PLAIN else "?" for char in words)
    return cleaned or "?"


@dataclass(frozen=True)
class NodeReasons:
    """The reasons of one campaign."""

    campaign: str

    @property
    def head(self) -> str:
        return f"{REASON_PREFIX}{clean_text(self.campaign, 96)}"

    def taken(self) -> str:
        """A node the campaign holds for its attempts (a drain)."""
        return f"{self.head} taken for attempts"

    def wedged(self, phase: object, attempt: object) -> str:
        """A node declared wedged (set down); ``phase`` is the host's word, cleaned."""
        return (f"{self.head} wedge in {clean_text(phase or 'unknown phase')}, attempt {clean_text(attempt, 36)}, "
                "power cycle under way")

    def unreachable(self, attempt: object) -> str:
        """A node that stopped answering between attempts (set down while it is recovered)."""
        return f"{self.head} unreachable before attempt {clean_text(attempt, 36)}, power cycle under way"

    def ours(self, reason: str) -> bool:
        """Written by this campaign (any of the reasons above)."""
        return reason == self.head or reason.startswith(self.head + " ")

    def held_for_attempts(self, reason: str) -> bool:
        """The drain this campaign gives back at its end."""
        return reason == self.taken()
