"""report.html: one self-contained file to attach to a bug, readable without JavaScript.

Everything is inline (styles, SVG figures; no script, no font, no fetch), so the file opens
the same from a mail attachment, offline, or printed. Every number and sentence comes from
the :class:`~reprofleet.verdicts.Judgement` (the verdict table is the very text of
report.md); this module only lays it out and adds what a person wants to see: the machines
compared, and what each was doing in the seconds before it froze.
"""

from __future__ import annotations

import html
from collections import Counter
from typing import Any, Sequence

from reprofleet.records.identity import cell_name
from reprofleet.records.pooling import Pool
from reprofleet.records.reader import RecordedAttempt
from reprofleet.verdicts import ALL_HOSTS, Judgement, natural_key, pct
from reprofleet.report.commands import commands_html
from reprofleet.report.folders import Folders
from reprofleet.report.forest import forest_svg
from reprofleet.report.freeze import draw_within_budget, drawable, freeze_html, load_trace, points_for
from reprofleet.report.host_debug import html_section as host_debug_html
from reprofleet.report.hostfacts import facts_html
from reprofleet.report.markdown import OUTCOMES, RAN_UNDER, ran_under_rows, verdict_rows
from reprofleet.report.phases import phase_histogram_svg, time_to_wedge_svg
from reprofleet.report.search import SearchReport, boundary_lines, ladder_svg, posterior_svg, verdict_rows as search_rows
from reprofleet.report.style import CSS
from reprofleet.report.timeline import build_timeline, timeline_svg

FREEZES = ("wedge", "reboot")
SHOWN_UP = ("wedge", "reboot", "power_loss")  # a count of these, when not 0, is marked in the rate table


def _e(value: Any) -> str:
    return html.escape(str(value))


def verdict_table(judgement: Judgement, extra: Sequence[tuple[str, str]] = ()) -> str:
    kinds = {(f"{v.cell} (reference)" if v.reference else v.cell): v.kind.value for v in judgement.verdicts}
    rows = "".join(f'<tr class="v-{_e(kinds.get(cell, "")).replace(" ", "-")}"><td>{_e(cell)}</td><td>{_e(text)}</td></tr>'
                   for cell, text in [*verdict_rows(judgement), *extra])
    notes = "".join(f'<p class="warning">Note: {_e(w)}</p>' for w in judgement.warnings)
    return (f'<table class="verdicts" id="verdict-table"><thead><tr><th>cell</th><th>verdict</th></tr></thead>'
            f"<tbody>{rows}</tbody></table>{notes}")


def rate_table(judgement: Judgement) -> str:
    label = judgement.rows[0].rate.label() if judgement.rows else "95% two-sided exact"
    head = "".join(f"<th>{o}</th>" for o in OUTCOMES) + "<th>error/hang at risk</th>"
    body = []
    for row in judgement.rows:
        tally, approx = row.tally, "≈ " if row.approximate else ""
        mix = " (this fleet's mix)" if row.mix else ""
        rate = (f"{approx}{pct(tally.reproductions / tally.judged)} ({tally.reproductions}/{tally.judged}){mix}"
                if tally.judged else "—")
        ci = f"{approx}{pct(row.rate.low)}–{pct(row.rate.high)}" if tally.judged else "—"
        counts = "".join(f'<td class="n{" o-" + o if tally.outcomes.get(o) and o in SHOWN_UP else ""}">'
                         f"{tally.outcomes.get(o, 0)}</td>" for o in OUTCOMES) + f'<td class="n">{tally.at_risk}</td>'
        cls = ' class="pooled"' if row.host == ALL_HOSTS else ""
        cell = f"{row.cell} (reference)" if row.reference else row.cell
        body.append(f"<tr{cls}><td>{_e(cell)}</td><td>{_e(row.host)}</td><td class=\"n\">{tally.judged}</td>{counts}"
                    f"<td class=\"n\">{tally.excluded}</td><td class=\"n\">{tally.not_run}</td><td class=\"n\">{_e(rate)}</td>"
                    f"<td class=\"n\">{_e(ci)}</td></tr>")
    return (f'<table class="rates"><thead><tr><th>cell</th><th>host</th><th>judged</th>{head}<th>excluded</th><th>not run</th>'
            f"<th>reproduction rate</th><th>{_e(label)} CI</th></tr></thead><tbody>{''.join(body)}</tbody></table>")


def not_judged(judgement: Judgement, records: Sequence[RecordedAttempt]) -> str:
    """Excluded attempts by reason (the verdict layer's counts) and infra attempts by host and reason."""
    parts = []
    if judgement.excluded:
        items = "".join(f"<li>{n}× {_e(reason)}</li>" for reason, n in judgement.excluded.items())
        parts.append(f"<p>Excluded from every rate:</p><ul>{items}</ul>")
    infra = Counter((r.host, r.cell, r.reason or "no reason recorded") for r in records if r.outcome == "infra")
    if infra:
        rows = "".join(f"<tr><td>{_e(h)}</td><td>{_e(c)}</td><td class=\"n\">{n}</td><td>{_e(reason)}</td></tr>"
                       for (h, c, reason), n in sorted(infra.items(), key=lambda i: (natural_key(i[0][0]), i[0][1:])))
        parts.append("<p>Attempts that never tested the GPU (<code>infra</code>: the controller, the network or the "
                     "host's preparation failed):</p><table><thead><tr><th>host</th><th>cell</th><th>attempts</th>"
                     f"<th>reason</th></tr></thead><tbody>{rows}</tbody></table>")
    return "".join(parts) or "<p>Every attempt was judged.</p>"


def _summary(judgement: Judgement, pool: Pool) -> str:
    judging = judgement.judging
    label = judgement.rows[0].rate.label() if judgement.rows else "95% two-sided exact"
    campaigns = ", ".join(sorted(pool.campaigns, key=natural_key))
    controllers = ", ".join(sorted({r.controller for r in pool.records}, key=natural_key))
    return (f"<p>{judgement.attempts} attempts on {len(judgement.hosts)} hosts ({_e(', '.join(judgement.hosts))}) "
            f"from campaign(s) {_e(campaigns)}, controller(s) {_e(controllers)}. Reproductions: "
            f"{_e(', '.join(o.value for o in judging.reproductions))}. Reference cell: <b>{_e(judgement.reference)}</b>. "
            f"Intervals: {_e(label)}; <code>infra</code> is never in a rate.</p>")


def _freezes(pool: Pool, folders: Folders) -> str:
    freezes = sorted((r for r in pool.records if r.outcome in FREEZES), key=lambda r: (str(r.started), r.attempt))
    if not freezes:
        return "<p>No attempt wedged or rebooted its host.</p>"
    points = points_for(len(freezes))
    traces = [load_trace(r, folders.stream(r), points) for r in freezes]
    drawn = draw_within_budget(traces)
    left_out = sum(drawable(t) for t in traces) - len(drawn)
    head = (f"<p>{len(freezes)} wedges and reboots, in the order they happened; {left_out} figures left out to keep "
            "the file under 5 MB (their text is below; their streams are in the campaign folder).</p>"
            if left_out else f"<p>{len(freezes)} wedges and reboots, in the order they happened.</p>")
    return head + "\n".join(freeze_html(t, r, drawn.get(t.attempt)) for t, r in zip(traces, freezes))


def _figure(svg: str, caption: str) -> str:
    return f'<figure class="plot">{svg}<figcaption>{_e(caption)}</figcaption></figure>'


SECTIONS = (("verdicts", "Verdicts"), ("forest", "Rates per cell and host"), ("timeline", "Timeline per host"),
            ("freezes", "Every wedge and reboot: the last minute"), ("phases", "How far attempts got"),
            ("hosts", "The machines"), ("commands", "Reproduce one attempt by hand"), ("not-judged", "Not judged"))


def _search(search: SearchReport) -> str:
    lines = "".join(f"<li>{_e(line)}</li>" for line in boundary_lines(search))
    return (f"<ul>{lines}</ul>"
            + _figure(ladder_svg(search), "The ladder: each probe at its level, in the order attempts started, per host "
                      "group; crosses reproduced, circles clean, squares said nothing (infra, or an error before the "
                      "phase at risk).")
            + _figure(posterior_svg(search), "Pr(P > ε) per level and group; a level is clean when its bar is below "
                      "the dashed line at δ." if search.plan.kind == "search" else
                      "Pr(on the good side) per version; the dashed line is the posterior the bisection stops at."))


def _ran_under(records: Sequence[RecordedAttempt]) -> str:
    """What each cell ran under on each host: the stack and the GPU settings read back (report.md's table)."""
    rows = ran_under_rows(records)
    if not rows:
        return ""
    head = "".join(f"<th>{_e(h)}</th>" for h in RAN_UNDER)
    body = "".join("<tr>" + "".join(f"<td>{_e(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<h3>What each cell ran under, per host</h3><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(judgement: Judgement, pool: Pool, title: str, search: SearchReport | None = None) -> str:
    """The whole report as one string (deterministic: same records, same bytes); ``search``: a
    search's or bisection's result, its own section (the ladder and the posterior) and verdict rows."""
    folders = Folders.of(pool)
    records = sorted(pool.records, key=lambda r: (str(r.started), r.attempt))
    cell_names = list(dict.fromkeys(cell_name(v.cell_id) for v in judgement.verdicts))
    body = {
        "verdicts": _summary(judgement, pool) + verdict_table(judgement, search_rows(search) if search else ()),
        "forest": _figure(forest_svg(judgement), "Each cell on each host and pooled over hosts (diamonds): the rate "
                          "and its exact interval. The reference cell is shaded.") + rate_table(judgement),
        "timeline": _figure(timeline_svg(build_timeline(records, folders.lines("power.jsonl"),
                                                        folders.lines("events.jsonl"))),
                            "Every attempt at its start time, coloured by outcome; power cycles, quarantines and "
                            "pauses of the campaign."),
        "freezes": host_debug_html(records) + _freezes(pool, folders),
        "phases": _figure(phase_histogram_svg(records, cell_names), "The last vLLM phase each attempt reached, per "
                          "cell, every attempt (clean ones too), stacked by outcome.")
                  + _figure(time_to_wedge_svg(records, cell_names), "Seconds from each attempt's start to the last "
                            "line heard before its host froze."),
        "hosts": facts_html(folders.facts(records), records) + _ran_under(records),
        "commands": commands_html(judgement, records),
        "not-judged": not_judged(judgement, records),
    }
    shown = list(SECTIONS)
    if search is not None:
        body["search"] = _search(search)
        shown.insert(1, ("search", "Boundary search" if search.plan.kind == "search" else "Bisection"))
    toc = "".join(f'<li><a href="#{key}">{_e(label)}</a></li>' for key, label in shown)
    sections = "".join(f'<section id="{key}"><h2>{_e(label)}</h2>{body[key]}</section>' for key, label in shown)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "img-src data:\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
            f"<header><h1>{_e(title)}</h1><nav><ol>{toc}</ol></nav></header><main>{sections}</main>"
            "<footer>Written by reprofleet from the attempt records; report.md beside it has the same verdicts "
            "as text.</footer></body></html>\n")
