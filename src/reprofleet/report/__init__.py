"""Reports over pooled attempt records: report.md (Markdown) and report.html (figures).

The terminal table is in progress.py; both reports print the verdict layer's sentences.
The two renderers load on first use (PEP 562): importing one module of this package, such
as ``report.compare``, does not pull in matplotlib through ``report.html``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reprofleet.report.html import render_html
    from reprofleet.report.markdown import render_markdown

__all__ = ["render_html", "render_markdown"]


def __getattr__(name: str) -> Any:
    if name == "render_html":
        from reprofleet.report.html import render_html

        return render_html
    if name == "render_markdown":
        from reprofleet.report.markdown import render_markdown

        return render_markdown
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
