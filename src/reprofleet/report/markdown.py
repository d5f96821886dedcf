"""A Markdown report a user can paste into a bug for NVIDIA or vLLM.

Everything in it comes from one :class:`~reprofleet.verdicts.Judgement`: the rate table
(per cell and host, each outcome, excluded attempts, the exact two-sided interval), each
cell against the reference (exact tests, Holm-adjusted), the splits by boot and cache,
every wedge and reboot with its last moments, what could not be judged, and, last, the
verdict table, word for word what the terminal prints.

Text a host printed (its last log line, its phase, kernel lines, BMC events, the reasons an
attempt was excluded or not run, and the verdict sentences that quote them) goes through
report/markdown_text.py: the report is pasted into public bug trackers, and a backtick in a log
line must not end its span and turn what follows into links, images or headings.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from reprofleet.model import Outcome
from reprofleet.records.gpu_settings import readback_summary
from reprofleet.records.host_stack import stack_words
from reprofleet.records.reader import RecordedAttempt, attempts_of
from reprofleet.verdicts import ALL_HOSTS, Judgement, fmt_p, pct
from reprofleet.verdicts.words import ratio
from reprofleet.report.host_debug import markdown_section as host_debug_section
from reprofleet.report.evidence import bmc_words, wall_at_freeze, wall_words
from reprofleet.report.markdown_text import code_span, prose
from reprofleet.report.search import SearchReport, markdown_section as search_section, verdict_rows as search_rows

OUTCOMES = tuple(o.value for o in Outcome)  # every outcome has its column, power_loss included


def _cell(name: str, reference: bool) -> str:
    return f"{name} (reference)" if reference else name


def _rate_table(judgement: Judgement) -> list[str]:
    label = judgement.rows[0].rate.label() if judgement.rows else "95% two-sided exact"
    lines = ["| cell | host | judged | " + " | ".join(OUTCOMES) + " | error/hang at risk | excluded | not run "
             f"| reproduction rate | {label} CI |",
             "| --- | --- | ---: | " + " | ".join("---:" for _ in OUTCOMES) + " | ---: | ---: | ---: | ---: | --- |"]
    for row in judgement.rows:
        tally = row.tally
        approx = "≈ " if row.approximate else ""
        mix = " (this fleet's mix)" if row.mix else ""
        rate = (f"{approx}{pct(tally.reproductions / tally.judged)} ({tally.reproductions}/{tally.judged}){mix}"
                if tally.judged else "—")
        ci = f"{approx}{pct(row.rate.low)}–{pct(row.rate.high)}" if tally.judged else "—"
        counts = " | ".join(str(tally.outcomes.get(o, 0)) for o in OUTCOMES)
        host = f"**{row.host}**" if row.host == ALL_HOSTS else row.host
        lines.append(f"| {_cell(row.cell, row.reference)} | {host} | {tally.judged} | {counts} | {tally.at_risk} | "
                     f"{tally.excluded} | {tally.not_run} | {rate} | {ci} |")
    return lines


def _comparisons(judgement: Judgement) -> list[str]:
    compared = [v for v in judgement.verdicts if v.against_reference is not None]
    if not compared:
        return []
    ref = next(v for v in judgement.verdicts if v.reference)
    lines = [f"Each cell against `{ref.cell}`, only on the hosts that ran both (the strata; the reference "
             "identity that ran on each host). Two one-sided questions, each Holm-adjusted across the "
             f"{len(compared)} cells of this report: does it reproduce less often at all, and is its rate ratio "
             "(cell / reference) below the playbook's `fixed_ratio`? Fixed-n numbers at a campaign's planned end, "
             "anytime-valid ones at any other look.", "",
             "| cell | hosts compared | test | p | Holm-adjusted p | rate ratio ≤ (95% one-sided) | ratio below "
             f"{judgement.judging.fixed_ratio:g}: Holm-adjusted p | common odds ratio | hosts disagree (p) |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for verdict in compared:
        test = verdict.against_reference
        assert test is not None
        odds = "—" if test.odds_ratio is None else f"{test.odds_ratio:.3g}"
        hetero = "—" if test.heterogeneity_p is None else f"{test.heterogeneity_p:.2g}"
        bound = "—" if test.ratio_upper is None else ratio(test.ratio_upper)
        fixed = "—" if test.p_fixed_adjusted is None else f"{test.p_fixed_adjusted:.3g}"
        lines.append(f"| {verdict.cell} | {', '.join(test.hosts)} | {test.method} | {test.p_value:.3g} | "
                     f"{test.p_adjusted:.3g} | {bound} | {fixed} | {odds} | {hetero} |")
    return lines


def _splits(judgement: Judgement) -> list[str]:
    splits = [(v, s) for v in judgement.verdicts for s in v.splits]
    if not splits:
        return []
    lines = ["A cell's rate in two groups of its own attempts (Boschloo exact, two-sided, Holm-adjusted across "
             "the splits below). A flagged split means the order of attempts or the cache state matters.", "",
             "| cell | split | group A | group B | p | Holm-adjusted p | |", "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for verdict, split in splits:
        flag = "**flagged**" if split.flagged else ""
        lines.append(f"| {verdict.cell} | {split.what} | {split.yes_label} {split.yes[0]}/{split.yes[1]} | "
                     f"{split.no_label} {split.no[0]}/{split.no[1]} | {split.p_value:.3g} | {split.p_adjusted:.3g} | {flag} |")
    return lines


def _wedges(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """``records``: typed, or their JSON lines (read as typed here)."""
    wedges = [r for r in attempts_of(records) if r.outcome in ("wedge", "reboot")]
    if not wedges:
        return []
    lines = ["| host | cell | outcome | detected after | last phase | last log line | previous boot | wall power "
             "| BMC event log |", "| --- | --- | --- | ---: | --- | --- | --- | --- | --- |"]
    for record in sorted(wedges, key=lambda r: (str(r.started), r.attempt)):  # the same order from any copy
        forensics = record.forensics
        findings = forensics.get("findings") or []
        if forensics.get("journal_persistent") is False:
            boot = "journal not persistent: nothing survived"
        elif findings:
            boot = "; ".join(code_span(str(f.get("line", ""))[:80]) for f in findings[:2])
        else:
            boot = "no Xid/NVRM/AER/MCE/watchdog line" if forensics.get("previous_boot_available") else "—"
        latency = record.detect_latency_s
        line = code_span(str(record.last_log_line or "")[-100:])
        phase = code_span(str(record.last_phase or "")) + (f" ({record.phase_note})" if record.phase_note else "")
        lines.append(f"| {record.host} | {record.cell} | {record.outcome} | "
                     f"{f'{latency:.1f} s' if latency else '—'} | {phase} | {line} | {boot} | "
                     f"{prose(wall_words(wall_at_freeze(record)))} | {_bmc(forensics)} |")
    return lines


def _bmc(forensics: Mapping[str, Any]) -> str:
    """The BMC's events in a code span (a host writes their messages: ``ipmitool sel add``)."""
    words = bmc_words(forensics)
    return words if words == "—" else code_span(words)


def quoted_reasons(judgement: Judgement) -> tuple[str, ...]:
    """The strings a verdict sentence or a note may quote from records: why attempts were excluded or not run."""
    return (*judgement.excluded, *judgement.not_run)


RAN_UNDER = ("cell", "host", "attempts", "wedges/reboots", "host stack", "GPU settings read back", "against the plan")


def ran_under_rows(records: Sequence[RecordedAttempt]) -> list[tuple[str, str, int, int, str, str, str]]:
    """Per cell and host: the host stack and the GPU settings read back before its attempts, and
    where they differ from the cell's plan (report.md and report.html print these). The evidence a
    verdict rests on is what ran, not what was asked: a default cell under an owner's clock lock,
    or wedges under an older driver, are rows of their own in the rate table, and this says why."""
    groups: dict[tuple[str, str, str, str, str], list[RecordedAttempt]] = {}
    for record in records:
        if record.runs_again:
            continue
        departed = "; ".join(record.settings_departures()) or "as planned"
        key = (record.cell, record.host, stack_words(record.stack), readback_summary(record.policy), departed)
        groups.setdefault(key, []).append(record)
    return [(cell, host, len(items), sum(1 for r in items if r.outcome in ("wedge", "reboot")), stack, readback, departed)
            for (cell, host, stack, readback, departed), items in sorted(groups.items())]


def ran_under(records: Sequence[RecordedAttempt]) -> list[str]:
    """:func:`ran_under_rows` as a Markdown table (none when no attempt ran)."""
    rows = ran_under_rows(records)
    if not rows:
        return []
    lines = ["| " + " | ".join(RAN_UNDER) + " |", "| --- | --- | ---: | ---: | --- | --- | --- |"]
    for cell, host, n, frozen, stack, readback, departed in rows:
        lines.append(f"| {code_span(cell)} | {code_span(host)} | {n} | {frozen} | {code_span(stack)} | "
                     f"{code_span(readback)} | {code_span(departed)} |")
    return lines


def verdict_rows(judgement: Judgement) -> list[tuple[str, str]]:
    """(cell, verdict) pairs, word for word: report.md, report.html and the terminal print these.
    A stop is already in the sentence ("stopped by RULE after n"), never the rule's own claim."""
    return [(_cell(verdict.cell, verdict.reference), verdict.text) for verdict in judgement.verdicts]


def verdict_lines(judgement: Judgement, extra: Sequence[tuple[str, str]] = ()) -> list[str]:
    """The verdict table; ``extra``: rows that are no cell's (a search's boundary line)."""
    rows = [*verdict_rows(judgement), *extra]
    reasons = quoted_reasons(judgement)
    return ["| cell | verdict |", "| --- | --- |", *(f"| {cell} | {prose(text, reasons)} |" for cell, text in rows)]


def _header(judgement: Judgement) -> list[str]:
    judging = judgement.judging
    hosts = ", ".join(judgement.hosts)
    risk = (f"`error` and `hang` count as non-reproductions only after `{judging.at_risk_phase.value}` (in the "
            "engine's own phase order); in it they have a column of their own and are never clean, before it they "
            "are excluded." if judging.at_risk_phase else "`error` and `hang` are excluded (no `at_risk_phase` set).")
    lines = [f"{judgement.attempts} attempts on {len(judgement.hosts)} hosts ({hosts}). Reproductions: "
             f"{', '.join(o.value for o in judging.reproductions)} (shown in separate columns). {risk} `infra` is "
             f"never in a rate, and a slot that runs again (interrupted, not run) is in no rate and no share. A cell "
             f"that never reproduced with more than {judging.max_excluded_share:.0%} of its attempts excluded cannot "
             f"be judged. \"fixed\" needs the rate ratio (cell / reference) bounded below "
             f"{judging.fixed_ratio:g}. Reference cell: `{judgement.reference}`."]
    lines += [f"> **Note:** {prose(w, quoted_reasons(judgement), in_table=False)}" for w in judgement.warnings]
    return lines


def sensitivity_lines(judgement: Judgement) -> list[str]:
    """How far each rate could move if the excluded attempts of its cell had been judged: all
    reproductions at worst, none at best. A slot nothing could be learnt about (a controller
    that died, a host that never said) is counted here, never silently dropped."""
    moved = [v for v in judgement.verdicts if v.excluded]
    if not moved:
        return []
    lines = ["", "Sensitivity: each cell's rate had its excluded attempts been judged (none reproducing / all "
                 "reproducing):", ""]
    for v in moved:
        n, k, x = v.judged, v.reproductions, v.excluded
        now = f"{pct(k / n)} ({k}/{n})" if n else "—"
        lines.append(f"- `{v.cell}`: {now} now; {pct(k / (n + x))} ({k}/{n + x}) to "
                     f"{pct((k + x) / (n + x))} ({k + x}/{n + x}) with the {x} excluded")
    return lines


def render_markdown(judgement: Judgement, records: Sequence[Mapping[str, Any]], title: str,
                    search: SearchReport | None = None) -> str:
    """``records``: the pool's (typed), or their JSON lines; ``search``: a search's or bisection's
    result (report/search.py), its own section and verdict rows."""
    attempts = attempts_of(records)
    parts = [f"# {title}", "", *_header(judgement), "", "## Rates", "", *_rate_table(judgement)]
    if search is not None:
        parts += ["", "## Boundary" if search.plan.kind == "search" else "## Change point", "",
                  *search_section(search)]
    for heading, section in (("Against the reference cell", _comparisons(judgement)),
                             ("Does the order of attempts matter?", _splits(judgement)),
                             ("Every wedge and reboot", _wedges(attempts)),
                             ("What each cell ran under, per host", ran_under(attempts)),
                             ("Kernel lockup panics (host_debug)", host_debug_section(attempts))):
        if section:
            parts += ["", f"## {heading}", "", *section]
    if judgement.excluded:
        parts += ["", "## Not judged (excluded from every rate)", ""]
        parts += [f"- {n}× {code_span(reason, in_table=False)}" for reason, n in judgement.excluded.items()]
        parts += sensitivity_lines(judgement)
    if judgement.not_run:
        parts += ["", "## Slots not run (in no rate and no share; a resume runs them)", ""]
        parts += [f"- {n}× {code_span(reason, in_table=False)}" for reason, n in judgement.not_run.items()]
    parts += ["", "## Verdicts", "", *verdict_lines(judgement, search_rows(search) if search else ())]
    return "\n".join(parts) + "\n"


__all__ = ["render_markdown", "verdict_lines", "verdict_rows", "fmt_p", "code_span"]
