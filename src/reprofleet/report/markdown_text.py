"""Markdown's sanitizer: a host's text goes into report.md only inside a code span or fence it cannot leave.

report.md and the issue text are pasted into public bug trackers, where a link, an image or a
heading in a reason (an agent error, a BMC event a host added with ``ipmitool sel add``, a PoC's
last line) would be drawn as the reader's own tracker draws them. So every string a host wrote is
quoted: :func:`code_span` inline (its fence one backtick longer than the longest run in the text,
as CommonMark ends a span only at a run of the same length), :func:`code_block` for lines. A
sentence of our own that quotes a host's string (a verdict naming its excluded reasons) is
:func:`prose`: the quoted strings become code spans, and what is left has every character that
could start a Markdown construct escaped. Control characters go first (records/host_text.py).
"""

from __future__ import annotations

import re
from typing import Iterable

from reprofleet.records.host_text import inert

# what can open a link, an image, emphasis, strikethrough, a code span, HTML or an entity, or end a table
# cell; an underscore inside a word (``attempts_per_cell``) opens nothing in CommonMark and is left as it is
_ACTIVE = re.compile(r"([\\`*\[\]<>|~&]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
_BACKTICKS = re.compile(r"`+")


def code_span(text: object, in_table: bool = True) -> str:
    """``text`` as one inline code span it cannot leave; ``—`` when empty. ``in_table``: a ``|``
    is escaped (GFM drops the backslash inside a table's code span; elsewhere it would show)."""
    value = inert(text)
    if in_table:
        value = value.replace("|", "\\|")
    if not value.strip():
        return "—"
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(value)), default=0) + 1)
    pad = " " if value[0] in "` " or value[-1] in "` " else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def code_block(text: object, lang: str = "text") -> list[str]:
    """``text`` (lines kept) as a fenced block: the fence is longer than any backtick run in it,
    so no line of the text closes it."""
    value = inert(text, keep_lines=True)
    fence = "`" * max(3, max((len(run) for run in _BACKTICKS.findall(value)), default=0) + 1)
    return [f"{fence}{lang}", value, fence]


def prose(text: object, quoted: Iterable[str] = (), in_table: bool = True) -> str:
    """One line of our own words that may quote a host's strings: each string of ``quoted`` found in
    it becomes a code span, and the rest is inert with its Markdown characters escaped."""
    value = inert(text)
    found = sorted({inert(q) for q in quoted if q and inert(q).strip()}, key=len, reverse=True)
    if not found:
        return _escaped(value)
    pieces = re.split("(" + "|".join(re.escape(q) for q in found) + ")", value)
    return "".join(code_span(piece, in_table) if i % 2 else _escaped(piece) for i, piece in enumerate(pieces))


def _escaped(text: str) -> str:
    return _ACTIVE.sub(r"\\\1", text)
