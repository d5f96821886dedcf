"""Reading a rendered report back: the rows of report.md's verdict table, each a list of its
cells' text. Used by the report.html tests to hold the page's table to the Markdown's.
"""

from __future__ import annotations


def markdown_verdicts(markdown: str) -> list[list[str]]:
    section = markdown.split("## Verdicts", 1)[1]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith(("| cell |", "| --- |"))]
