"""Reports over pooled attempt records: report.md (Markdown) and report.html (figures).

The terminal table is in ``cli/progress.py``; both reports print the verdict layer's sentences.

Modules: ``write`` (``invoke report`` and a campaign's end below the command line: pooled,
judged, report.md, report.html and an issue's text written), ``export`` (``invoke export``: the
rows in a file or returned), ``markdown`` (report.md), ``markdown_text`` (a host's text in
Markdown: in code spans or fences it cannot leave), ``html`` (report.html), ``style`` (its stylesheet),
``plots`` (matplotlib as inline SVG), ``forest`` (every cell on every host), ``freeze``
(the last minute before each freeze), ``timeline`` (each host over time), ``phases`` (how
far attempts got), ``evidence`` (wall power and BMC logs in words), ``host_debug``
(lockup-panic cells), ``hostfacts`` (machines side by side), ``commands`` (the commands
that reproduce a cell by hand), ``issue_text`` (``--issue``: the text a vLLM or NVIDIA bug report
asks for), ``compare`` (sides side by side, and ``invoke compare`` below the command line), ``folders`` (the files
beside a pool's records), ``status`` (``invoke status``: a campaign's state and verdicts so far), ``rates`` (each
cell's rate per host and pooled, for ``invoke report --json``), ``search`` (a search's boundary
or a bisection's change point: its lines, the ladder and posterior figures).

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
