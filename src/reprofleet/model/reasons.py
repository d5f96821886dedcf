"""Why an attempt is ``infra``, as a code that resume and reports can decide on.

A record's ``reason`` is words for a person, and records written by earlier controllers
already hold them, so the schema gains no key: the code is derived from the words here and
nowhere else. Writers build the words with :meth:`ReasonCode.words`, so the wording that
:func:`reason_code` reads back is the wording written, and a test pins every one of them.
"""

from __future__ import annotations

from enum import Enum, unique


@unique
class ReasonCode(str, Enum):
    """What an ``infra`` record's reason says happened to its slot."""

    INTERRUPTED = "interrupted"  # the campaign was stopped, or the controller died, under the attempt
    NOT_RUN = "not_run"  # the host was quarantined before the slot's turn
    UNREACHABLE_AT_START = "unreachable_at_start"  # the placeholder of a host frozen at campaign start
    UNEXPECTED_ERROR = "unexpected_error"  # a bug or an error nobody caught (the host is quarantined)
    CUT = "cut"  # its shared outlet was switched off by another host's power cycle
    HOST_SHUTDOWN = "host_shutdown"  # someone or something shut the host down in an orderly way under the attempt
    OTHER = "other"  # the host's or the agent's own problem, in its own words

    @property
    def runs_again_on_resume(self) -> bool:
        """An interrupted or never-run slot says nothing about the host: resume runs it again,
        and until then it counts for nothing (a resumed campaign tallies as an uninterrupted one).
        Nor does one a person's ``reboot`` or an automatic upgrade's reboot stopped."""
        return self in (ReasonCode.INTERRUPTED, ReasonCode.NOT_RUN, ReasonCode.CUT, ReasonCode.HOST_SHUTDOWN)

    def words(self, detail: str | None = None) -> str:
        """The reason as records write it: the code's fixed words, then ``: detail``."""
        head = _WORDS[self]
        return head if detail is None else f"{head}: {detail}"


_WORDS = {
    ReasonCode.INTERRUPTED: "interrupted",
    ReasonCode.NOT_RUN: "not run",
    ReasonCode.UNREACHABLE_AT_START: "unreachable at campaign start",
    ReasonCode.UNEXPECTED_ERROR: "unexpected error",
    ReasonCode.CUT: "cut by a neighbour's power cycle",
    ReasonCode.HOST_SHUTDOWN: "the host was shut down in an orderly way during the attempt",
    ReasonCode.OTHER: "",
}


def reason_code(reason: str | None) -> ReasonCode:
    """The code of an ``infra`` record's reason: by its leading words, as records since the
    first schema write them (``interrupted: the campaign was stopped``, ``not run: ...``)."""
    text = reason or ""
    for code, head in _WORDS.items():
        if head and text.startswith(head):
            return code
    return ReasonCode.OTHER


def slot_runs_again(outcome: str, reason: str | None) -> bool:
    """An ``infra`` attempt that was interrupted or never run: its slot runs again on resume,
    and it counts for nothing (a resumed campaign tallies as an uninterrupted one)."""
    return outcome == "infra" and reason_code(reason).runs_again_on_resume
