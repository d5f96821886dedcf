"""Text a host sent, made inert for any output: no control character and no escape sequence.

A host's strings (an agent error, a kernel line, a facts value, a PoC's last line) reach the
operator's terminal, report.md, the CSV export, notifications and the Prometheus file. Each of
those channels has its own sanitizer (cli/terminal_text.py, report/markdown_text.py,
records/csv_cells.py, campaign/notify_text.py, records/prometheus.py); all of them start here.

Removing sequences once is not enough: taking ``\\x1b[0m`` out of ``\\x1b\\x1b[0m[2J`` leaves
``\\x1b[2J``. So the sequences are removed until none is left, and then every control character
that remains (C0, DEL, C1, a lone ESC, and the Unicode controls that reorder text on screen) goes
too. Tabs and line breaks become a space unless the caller keeps lines.
"""

from __future__ import annotations

import re

# CSI (ESC [ or the C1 byte), OSC (titles, OSC-8 links) up to BEL or ST, DCS/SOS/PM/APC strings
# up to ST, and the two-byte escapes (ESC c resets the terminal, ESC 7/8, ESC ( B ...).
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)"
    r"|\x1b[ -/]*[0-~]"
)
# C0 but tab and line feed, DEL, C1; bidirectional overrides and isolates, the line and
# paragraph separators (a terminal or a tracker draws what follows elsewhere); lone surrogates
# (bytes that were not UTF-8, kept by surrogateescape: no output can encode them).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                      "\ud800-\udfff]")
_SPACING = re.compile(r"[\t\n]")


def inert(text: object, keep_lines: bool = False) -> str:
    """``text`` (any value, as ``str``) without escape sequences and control characters; tabs and
    line feeds become spaces unless ``keep_lines`` (a carriage return always goes)."""
    value = str(text)
    while True:
        stripped = _SEQUENCE.sub("", value)
        if stripped == value:
            break
        value = stripped
    value = _CONTROL.sub("", value)
    return value if keep_lines else _SPACING.sub(" ", value)


def has_control(text: str, keep_lines: bool = False) -> bool:
    """Whether ``text`` still holds a character :func:`inert` removes (tests and fuzzing ask)."""
    return _CONTROL.search(text) is not None or (not keep_lines and _SPACING.search(text) is not None)
