"""The notifications' sanitizer: a host's words in a notice are quoted, never markup, mentions or escapes.

A notice goes to Slack, Matrix, Discord, ntfy or email (through Apprise), or as JSON to a command;
most of those draw Markdown and expand mentions. A quarantine reason, a "needs a person" message,
a last phase or a verdict sentence that quotes a reason comes from a host, so its text is made
inert (records/host_text.py: no control, no escape sequence) and each host string is put in a
code span it cannot leave (its fence one backtick longer than any run in it), where a link, an
image, a heading or an ``@channel`` is shown as it was written.
"""

from __future__ import annotations

import re
from typing import Iterable

from reprofleet.records.host_text import inert

_BACKTICKS = re.compile(r"`+")


def quoted(text: object) -> str:
    """A host's string as one code span it cannot leave (``—`` when empty)."""
    value = inert(text)
    if not value.strip():
        return "—"
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(value)), default=0) + 1)
    pad = " " if value[0] in "` " or value[-1] in "` " else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def line_quoting(text: object, strings: Iterable[str]) -> str:
    """One line of our own words, each of the host's ``strings`` found in it quoted."""
    value = inert(text)
    found = sorted({inert(s) for s in strings if s and inert(s).strip()}, key=len, reverse=True)
    if not found:
        return value
    pieces = re.split("(" + "|".join(re.escape(s) for s in found) + ")", value)
    return "".join(quoted(piece) if i % 2 else piece for i, piece in enumerate(pieces))


def title(text: object) -> str:
    """A notice's title: one line, inert."""
    return inert(text)


def body(text: object) -> str:
    """A notice's body: its lines kept, each inert."""
    return inert(text, keep_lines=True)
