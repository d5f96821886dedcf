"""Reports over pooled attempt records: report.md (Markdown) and report.html (figures).

The terminal table is in progress.py; both reports print the verdict layer's sentences.
"""

from reprofleet.report.html import render_html
from reprofleet.report.markdown import render_markdown

__all__ = ["render_html", "render_markdown"]
