"""The terminal's sanitizer: what a host said is shown as text, never run as escapes or markup.

Every string that reaches the operator's terminal and holds a host's words (a quarantine
reason, an agent error, a facts value, a streamed phase, a verdict sentence that quotes a
reason) goes through here. Escape sequences and control characters are removed until none is
left (records/host_text.py: an OSC-8 link, ``ESC c``, a window title never reach the screen),
and rich markup is never parsed from it: a table cell is a :class:`~rich.text.Text` (rich does
not read markup in one), and no host text is put inside a markup string, so a ``[/]`` in a
kernel string cannot raise MarkupError and a ``[link=...]`` is never a link.

A failure to draw is the terminal's own problem: :func:`safe_print` logs it and goes on, so
no print can cost a campaign its report or its exit status.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

from reprofleet.records.host_text import inert

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

log = logging.getLogger(__name__)


def plain(value: Any) -> str:
    """A host's value as one line of plain text for ``print``: no escape, no control character."""
    return inert(value)


def cell(value: Any, style: str = "") -> "Text":
    """A host's value as a table cell or a line: inert, drawn in ``style``, never parsed as markup."""
    # lazy: rich is not loaded by the tasks that print plain lines (``invoke --list`` never draws)
    from rich.text import Text

    return Text(inert(value), style=style)


def new_console(**options: Any) -> "Console":
    """A rich console that goes quiet when its pipe closes (``invoke status | head``): rich's own
    answer is ``SystemExit(1)`` from inside the print, which would replace a campaign's exit status
    and skip whatever came after the print."""
    from rich.console import Console

    class _QuietOnBrokenPipe(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True  # what is left goes nowhere; the task goes on to its own exit status

    return _QuietOnBrokenPipe(**options)


def safe_print(console: "Console", *objects: Any) -> None:
    """``console.print(*objects)``; a failure (markup, an encoding, a closed pipe) is logged, not
    raised."""
    drawn("could not print to the terminal", lambda: console.print(*objects))


def drawn(what: str, draw: Callable[[], object]) -> None:
    """Run ``draw`` (a print, a live view's update, start or end); a failure is logged as ``what``,
    never raised: the terminal's failure never ends a task's records, report or exit status."""
    try:
        draw()
    except Exception as error:
        log.warning("%s: %s", what, inert(f"{type(error).__name__}: {error}"))
