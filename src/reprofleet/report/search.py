"""A search's or bisection's answer in the report: the boundary line, the ladder, the posterior.

The result is computed from the records, through the same seam the runner asked
(``playbook.ladder``: records -> probes by the campaign's own outcome roles and phase gate
-> the model), with the ladder as ``campaign.json`` keeps it; so report.md says what the
campaign's ``search_done`` event said, and a report of a folder copied elsewhere says it
too. A pool without a search manifest has no such section.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from reprofleet.model import Judging
from reprofleet.playbook.ladder import Ladder, LadderPlan, LadderResult, ladder_from_json, probe_of, result_json
from reprofleet.records.pooling import Pool
from reprofleet.records.reader import RecordedAttempt
from reprofleet.stats.changepoint import bad_check_attempts
from reprofleet.stats.search_contract import (BisectResult, BisectSpec, HostException, Probe, ProbeOutcome,
                                              SearchResult)

_MARKS = {ProbeOutcome.REPRODUCED: ("wedge", "X"), ProbeOutcome.CLEAN: ("clean", "o"),
          ProbeOutcome.UNUSABLE: ("infra", "s")}  # colour (plots.OUTCOME_COLOURS) and marker per outcome


@dataclass(frozen=True)
class LadderStep:
    """One probe as the ladder plot draws it: when, where, what."""

    started: str
    host: str
    group: str
    probe: Probe


@dataclass(frozen=True)
class SearchReport:
    campaign: str
    plan: LadderPlan
    result: LadderResult
    steps: tuple[LadderStep, ...]  # in the order the attempts started (the ladder figure's x axis)

    def to_json(self) -> dict[str, Any]:
        return {"campaign": self.campaign, "kind": self.plan.kind, "factor": self.plan.factor,
                "levels": list(self.plan.labels), "cells": list(self.plan.cells), "result": result_json(self.result),
                "lines": boundary_lines(self)}


def search_report(pool: Pool, folders: Sequence[Path],
                  ladder_for: Callable[[LadderPlan], Ladder] | None = None) -> SearchReport | None:
    """The first campaign of the pool whose manifest holds a ladder (a pool mixes campaigns
    at its reader's risk: only that campaign's records are the ladder's evidence)."""
    for root in folders:
        manifest = _manifest(root / "campaign.json")
        if manifest is None or not isinstance(manifest.get("search"), dict):
            continue
        plan = ladder_from_json(manifest["search"])
        judging = Judging.from_json(manifest.get("judging"))
        campaign = str(manifest.get("campaign"))
        records = [r for r in pool.records if r.campaign == campaign]  # attempts.jsonl's order, as the runner read it
        ladder = (ladder_for or LadderPlan.ladder)(plan)
        result = ladder.results(tuple(s.probe for s in _steps(records, plan, judging)))
        in_time = sorted(records, key=lambda r: (str(r.started), r.attempt))
        return SearchReport(campaign, plan, result, tuple(_steps(in_time, plan, judging)))
    return None


def _manifest(path: Path) -> Mapping[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _steps(records: Sequence[RecordedAttempt], plan: LadderPlan, judging: Judging) -> list[LadderStep]:
    groups = dict(getattr(plan.spec, "groups", ()) or ())
    steps = []
    for record in records:
        probe = probe_of(record, plan, judging)  # the ladder reads a record's line, as the runner handed it
        if probe is not None:
            steps.append(LadderStep(str(record.started), probe.host, groups.get(probe.host, "all"), probe))
    return steps


def _pr(value: float | None) -> str:
    return "—" if value is None else f"{value:.2g}"


def boundary_lines(report: SearchReport) -> list[str]:
    """One sentence per host group (a search) or one for the change point (a bisection)."""
    plan, result = report.plan, report.result
    if isinstance(result, BisectResult):
        return [_bisect_line(plan, stratum) for stratum in (result, *result.strata)]
    return [_search_line(plan, group) for group in result]


def _search_line(plan: LadderPlan, group: SearchResult) -> str:
    spec = plan.spec
    if group.split_from is not None:
        who = f"host {', '.join(group.hosts)} (left out of {group.split_from}: answered from its own records)"
    elif group.group == "all":
        who = f"hosts {', '.join(group.hosts)}"
    else:
        who = f"group {group.group} ({', '.join(group.hosts)})"
    target = f"ε={spec.epsilon:g}, δ={spec.delta:g}"
    if group.boundary is None:
        head = f"{who}: no level meets {target}, not even the safest ({plan.labels[0]})"
    else:
        head = (f"{who}: highest clean level meeting {target}: {plan.labels[group.boundary]} "
                f"(Pr(P>ε)={_pr(group.p_bad_at_boundary)})")
    if group.above is not None:
        evidence = group.levels[group.above] if group.above < len(group.levels) else None
        seen = f"{evidence.reproductions}/{evidence.attempts} reproduced" if evidence else "no evidence"
        head += f"; above it {plan.labels[group.above]}: {seen}"
    state = "decided" if group.done else "not decided"
    return (f"{head}; {group.attempts} attempts, {group.power_cycles} power cycles; {state} ({group.why})"
            + _exceptions(plan, group.exceptions))


def _exceptions(plan: LadderPlan, exceptions: Sequence[HostException]) -> str:
    """The hosts an answer does not cover, each with its own evidence (issue 33: never a silent pool)."""
    if not exceptions:
        return ""
    return "; not covered: " + "; ".join(
        f"{e.host} at {plan.labels[e.level]} ({e.reproductions}/{e.attempts}): {e.why}" for e in exceptions)


def _bisect_line(plan: LadderPlan, result: BisectResult) -> str:
    label = (lambda v: "—" if v is None else plan.labels[v])
    ends = {None: "endpoints not re-checked yet", True: "endpoints re-checked",
            False: "an endpoint failed its re-check (the known bad never reproduced or the good end missed its target)"}
    state = "decided" if result.done else "not decided"
    who = f"group {result.group}" if result.group != "all" else "hosts"
    covers = f"{who} {', '.join(result.hosts)}: " if result.hosts else ""
    return (f"{covers}first good: {label(result.first_good)} (posterior {result.posterior:.3g}), last bad: "
            f"{label(result.last_bad)}; {ends[result.endpoints_ok]}; {result.attempts} attempts, "
            f"{result.power_cycles} power cycles; {state} ({result.why})" + _exceptions(plan, result.exceptions))


def markdown_section(report: SearchReport) -> list[str]:
    """The boundary lines and the evidence per level, for report.md."""
    plan, result = report.plan, report.result
    kind = "Boundary search" if plan.kind == "search" else "Bisection"
    lines = [f"{kind} over `{plan.factor}` (campaign `{report.campaign}`), levels in the model's order: "
             + ", ".join(plan.labels) + ".", ""]
    lines += [f"- {line}" for line in boundary_lines(report)]
    lines += ["", _claim(plan), ""]
    if isinstance(result, BisectResult):
        lines += ["| version | counted | reproduced | unusable | skipped | Pr(good) |", "| --- | ---: | ---: | ---: | --- | ---: |"]
        lines += [f"| {plan.labels[v.version]} | {v.attempts} | {v.reproductions} | {v.unusable} | "
                  f"{'yes' if v.skipped else ''} | {v.p_good:.3g} |" for v in result.versions]
        return lines
    for group in result:
        lines += [f"Group `{group.group}`:", "", "| level | counted | reproduced | Pr(P>ε) | mean P | 95% upper |",
                  "| --- | ---: | ---: | ---: | ---: | ---: |"]
        lines += [f"| {plan.labels[lv.level]} | {lv.attempts} | {lv.reproductions} | {lv.p_bad:.3g} | "
                  f"{lv.mean:.3g} | {lv.upper:.3g} |" for lv in group.levels]
        lines.append("")
    return lines


def _claim(plan: LadderPlan) -> str:
    if plan.kind == "search":
        return ("A clean level claims P(reproduction) ≤ ε with probability ≥ 1-δ under the monotone model (a riskier "
                "level is never safer), for the hosts of its group, the software and settings of these cells; it "
                "does not claim the level never wedges.")
    spec = plan.spec
    assert isinstance(spec, BisectSpec)
    return ("The change point is where the model puts the switch from bad to good with the stated posterior; versions "
            "whose attempts were all unusable are skipped, never counted as either side. It assumes a bad version "
            f"reproduces at least {spec.min_bad_rate:g} of the time (`bisect.min_rate`): the first good is called good "
            f"after {bad_check_attempts(spec.posterior, spec.min_bad_rate)} clean runs, which a version at that rate "
            f"passes at most {1 - spec.posterior:.2g} of the time; a rarer bad version is not ruled out.")


def verdict_rows(report: SearchReport) -> list[tuple[str, str]]:
    """The boundary as rows of the verdict table (cell column: what the row is about)."""
    name = "search boundary" if report.plan.kind == "search" else "bisection"
    return [(name, line) for line in boundary_lines(report)]


def ladder_svg(report: SearchReport) -> str:
    """Levels x outcomes over time, one row per host group: where the search went, and what it saw."""
    from reprofleet.report import plots  # matplotlib only when a figure is drawn (report.md needs none)

    groups = list(dict.fromkeys(step.group for step in report.steps)) or ["all"]
    with plots.style():
        fig, axes = plots.figure(7.5, 0.6 + 1.6 * len(groups), rows=len(groups), sharex=True)
        axes = axes if isinstance(axes, list) else [axes]
        for ax, group in zip(axes, groups):
            steps = [(n, s) for n, s in enumerate(report.steps) if s.group == group]
            if not steps:
                plots.no_data(fig, ax, "no probe yet")
                continue
            for outcome, (colour_key, marker) in _MARKS.items():
                points = [(n, s.probe.level) for n, s in steps if s.probe.outcome is outcome]
                if points:
                    ax.scatter([p[0] for p in points], [p[1] for p in points], marker=marker, s=22,
                               color=plots.OUTCOME_COLOURS[colour_key], label=outcome.value, zorder=3)
            ax.plot([n for n, _ in steps], [s.probe.level for _, s in steps], color="#bbbbbb", linewidth=0.6, zorder=1)
            ax.set_yticks(range(len(report.plan.labels)), report.plan.labels, fontsize=7)
            ax.set_ylim(-0.5, len(report.plan.labels) - 0.5)
            ax.set_title(f"group {group}", fontsize=8, loc="left")
            ax.legend(fontsize=6, loc="upper left", frameon=False)
        axes[-1].set_xlabel("probe, in the order attempts started")
        return plots.svg_of(fig, f"{report.plan.kind} ladder")


def posterior_svg(report: SearchReport) -> str:
    """Pr(P > ε) per level and group (a search; the line at δ) or Pr(good) per version (a bisection)."""
    from reprofleet.report import plots

    plan, result = report.plan, report.result
    with plots.style():
        fig, ax = plots.figure(7.5, 2.6)
        labels = list(plan.labels)
        if isinstance(result, BisectResult):
            values = [v.p_good for v in result.versions]
            ax.bar(range(len(values)), values, color="#1565c0")
            stop_at = plan.spec.posterior if isinstance(plan.spec, BisectSpec) else 0.95
            ax.axhline(stop_at, color="#c62828", linewidth=0.8, linestyle="--")
            ax.set_ylabel("Pr(on the good side)")
        else:
            width = 0.8 / max(1, len(result))
            for g, group in enumerate(result):
                ax.bar([lv.level + (g - (len(result) - 1) / 2) * width for lv in group.levels],
                       [lv.p_bad for lv in group.levels], width=width, label=f"group {group.group}")
            ax.axhline(plan.spec.delta, color="#c62828", linewidth=0.8, linestyle="--")
            ax.set_ylabel("Pr(P > ε)")
            ax.legend(fontsize=6, frameon=False)
        ax.set_xticks(range(len(labels)), labels, fontsize=7)
        ax.set_ylim(0, 1.02)
        return plots.svg_of(fig, f"{plan.kind} posterior per level")
