"""How far attempts got: the last vLLM phase reached per cell, and time from start to wedge.

Clean attempts are counted too: a cell whose wedges all happen in CUDA-graph capture while
its clean attempts pass it says something different from one that never gets that far.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from reprofleet.model import PHASE_ORDER
from reprofleet.records.reader import RecordedAttempt
from reprofleet.report import plots
from reprofleet.report.timeline import parse_time

NO_PHASE = "(none)"


def last_phase_counts(records: Sequence[RecordedAttempt], cell: str) -> dict[str, Counter[str]]:
    """Phase -> outcome counts for one cell's attempts (``(none)``: no phase line seen)."""
    counts: dict[str, Counter[str]] = {}
    for record in records:
        if record.cell == cell:
            phase = str(record.last_phase or NO_PHASE)
            counts.setdefault(phase, Counter())[record.outcome] += 1
    return counts


def phase_histogram_svg(records: Sequence[RecordedAttempt], cells: Sequence[str]) -> str:
    """One panel per cell (playbook order), phases in engine order, bars stacked by outcome."""
    with plots.style():
        fig, axes = plots.figure(7.5, 0.7 + 1.3 * max(1, len(cells)), rows=max(1, len(cells)), sharex=True)
        axes = axes if isinstance(axes, list) else [axes]
        phases = [NO_PHASE, *PHASE_ORDER]
        extra = sorted({str(r.last_phase) for r in records if r.last_phase} - set(phases))
        phases += extra
        if not cells:
            plots.no_data(fig, axes[0], "no attempts")
        for ax, cell in zip(axes, cells):
            counts = last_phase_counts(records, cell)
            bottom = [0] * len(phases)
            for outcome in plots.OUTCOME_ORDER:
                heights = [counts.get(p, Counter()).get(outcome, 0) for p in phases]
                if any(heights):
                    ax.bar(range(len(phases)), heights, bottom=bottom, color=plots.OUTCOME_COLOURS[outcome],
                           label=outcome, width=0.7)
                    bottom = [b + h for b, h in zip(bottom, heights)]
            ax.set_ylabel(cell, fontsize=7)
            ax.set_ylim(0, max(bottom + [1]) * 1.15)
            ax.yaxis.get_major_locator().set_params(integer=True)
        axes[-1].set_xticks(range(len(phases)), [p.replace("_", " ") for p in phases], rotation=30, ha="right",
                            fontsize=6)
        present = [o for o in plots.OUTCOME_ORDER if any(r.outcome == o for r in records)]
        handles = [plots.swatch(o) for o in present]
        if handles:
            fig.legend(handles=handles, loc="outside upper center", ncol=len(handles), fontsize=6, frameon=False)
        return plots.svg_of(fig, "last vLLM phase reached, per cell")


def seconds_to_freeze(record: RecordedAttempt) -> float | None:
    """From the attempt's start to the last line heard, on the controller's clock."""
    start, last = parse_time(record.started), parse_time(record.last_heartbeat)
    if start is None or last is None:
        return None
    return max(0.0, (last - start).total_seconds())


def time_to_wedge_svg(records: Sequence[RecordedAttempt], cells: Sequence[str]) -> str:
    """Each wedge or reboot as a dot: its cell, and seconds from start to the last line heard."""
    with plots.style():
        fig, ax = plots.figure(7.5, 0.9 + 0.3 * max(1, len(cells)))
        rows = {cell: len(cells) - 1 - i for i, cell in enumerate(cells)}
        shown = 0
        for outcome in ("wedge", "reboot"):
            points = [(seconds_to_freeze(r), rows[r.cell]) for r in records
                      if r.outcome == outcome and r.cell in rows]
            points = [(x, y) for x, y in points if x is not None]
            if points:
                shown += len(points)
                ax.scatter([x for x, _ in points], [y for _, y in points], color=plots.OUTCOME_COLOURS[outcome],
                           marker="D", s=22, label=outcome, alpha=0.8, linewidths=0)
        if not shown:
            plots.no_data(fig, ax, "no wedge or reboot with a start time and a last line heard")
            return plots.svg_of(fig, "time from attempt start to wedge")
        ax.set_yticks(list(rows.values()), list(rows.keys()))
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.set_xlim(left=0)
        ax.set_xlabel("seconds from attempt start to the last line heard from the host")
        fig.legend(fontsize=6, frameon=False, loc="outside lower center", ncol=2)  # never over a point
        return plots.svg_of(fig, "time from attempt start to wedge")
