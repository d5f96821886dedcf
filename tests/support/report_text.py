"""Reading a rendered report back: the rows of report.md's verdict table, each a list of its
cells' text as a reader sees it (Markdown rendered: a reason quoted in a code span reads as
its words). Used by the report.html tests to hold the page's table to the Markdown's.
"""

from __future__ import annotations

import re
from html import unescape

from markdown_it import MarkdownIt

_INLINE = MarkdownIt("commonmark")


def shown(cell: str) -> str:
    """One cell of a Markdown table as a reader sees it: rendered, its tags dropped."""
    return unescape(re.sub(r"<[^>]+>", "", _INLINE.renderInline(cell.replace("\\|", "|"))))


def markdown_verdicts(markdown: str) -> list[list[str]]:
    section = markdown.split("## Verdicts", 1)[1]
    return [[shown(c.strip()) for c in line.strip("|").split(" | ")] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith(("| cell |", "| --- |"))]
