"""The report's one stylesheet, inline: system fonts only (no web font to fetch), print-ready."""

from __future__ import annotations

CSS = """
:root { --fg: #1a1a1a; --muted: #555; --line: #d0d0d0; --bad: #b71c1c; --good: #1b5e20; --warn: #8a6d00; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: var(--fg);
       margin: 0 auto; max-width: 1100px; padding: 1rem 1.5rem 3rem; }
h1 { font-size: 1.5rem; margin: 0.5rem 0; } h2 { font-size: 1.2rem; border-bottom: 2px solid var(--line);
padding-bottom: 0.2rem; margin-top: 2rem; } h3 { font-size: 1rem; margin: 1.2rem 0 0.3rem; }
nav ol { columns: 2; font-size: 0.9rem; padding-left: 1.2rem; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.85rem; }
th, td { border: 1px solid var(--line); padding: 0.2rem 0.45rem; text-align: left; vertical-align: top; }
thead th { background: #f3f3f3; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.pooled td { font-weight: 600; background: #fafafa; }
table.verdicts td:first-child { white-space: nowrap; font-weight: 600; }
tr.v-reproduces td:last-child, tr.v-host-specific td:last-child { color: var(--bad); font-weight: 600; }
tr.v-fixed td:last-child { color: var(--good); font-weight: 600; }
tr.v-cannot-judge td:last-child { color: var(--warn); }
tr.differs th, tr.differs td { background: #fff3cd; } tr.differs th { color: var(--bad); }
.o-wedge, .o-reboot { color: var(--bad); font-weight: 600; }
.o-power_loss { color: var(--warn); font-weight: 600; }
figure.plot { margin: 0.5rem 0 1rem; } figure.plot svg { width: 100%; height: auto; display: block; }
figcaption, p.meta, p.note { color: var(--muted); font-size: 0.85rem; }
p.warning { color: var(--warn); }
pre { background: #f6f6f6; border: 1px solid var(--line); padding: 0.5rem; overflow-x: auto; font-size: 0.78rem;
      white-space: pre-wrap; word-break: break-all; }
pre.kernel { border-color: var(--bad); }
article.freeze { border-top: 1px solid var(--line); padding-top: 0.3rem; }
footer { margin-top: 3rem; color: var(--muted); font-size: 0.8rem; }
@media print {
  body { max-width: none; padding: 0; font-size: 11px; }
  nav { display: none; }
  section { break-inside: auto; } figure, article.freeze, table { break-inside: avoid; }
  h2 { break-after: avoid; }
  a { color: inherit; text-decoration: none; }
}
"""
