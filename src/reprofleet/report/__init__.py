"""Reports over pooled attempt records: report.md (Markdown) and report.html (figures).

The terminal table is in ``cli/progress.py``; both reports print the verdict layer's sentences.

Modules: ``markdown`` (report.md), ``html`` (report.html), ``style`` (its stylesheet),
``plots`` (matplotlib as inline SVG), ``forest`` (every cell on every host), ``freeze``
(the last minute before each freeze), ``timeline`` (each host over time), ``phases`` (how
far attempts got), ``evidence`` (wall power and BMC logs in words), ``host_debug``
(lockup-panic cells), ``hostfacts`` (machines side by side), ``commands`` (the commands
that reproduce a cell by hand), ``compare`` (sides side by side), ``folders`` (the files
beside a pool's records).
"""

from reprofleet.report.html import render_html
from reprofleet.report.markdown import render_markdown

__all__ = ["render_html", "render_markdown"]
