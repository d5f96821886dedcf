"""Where a task's answer goes: rich consoles for people, one JSON document or JSON lines for scripts.

With ``--json`` stdout carries only JSON (docs/schema/<task>.schema.json); whatever a person
would read goes to stderr.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from rich.console import Console


def console() -> "Console":
    """A terminal's own width; 160 columns in logs and CI, where rich would squeeze to 80."""
    return _console() if sys.stdout.isatty() else _console(width=160)


def stderr_console() -> "Console":
    return _console(stderr=True)


def _console(**options: Any) -> "Console":
    # lazy: rich.console is 12 ms of the 66 ms `import reprofleet.cli.tasks` takes; --list and --help never draw
    from reprofleet.cli.terminal_text import new_console

    return new_console(**options)


def say(as_json: bool, document: Any, text: Callable[[], str]) -> None:
    """One JSON document on stdout (``--json``: nothing else goes there), or the text."""
    if as_json:
        json_document(document)
    else:
        print(text(), flush=True)


def json_document(document: Any) -> None:
    """A task's whole answer as one JSON document (docs/schema/<task>.schema.json)."""
    print(json.dumps(document, default=str, indent=2), flush=True)


def json_line(document: Any) -> None:
    """One line of a JSON-lines answer (a task that says one thing per host)."""
    print(json.dumps(document, default=str, sort_keys=True), flush=True)
