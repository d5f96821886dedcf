"""The forest plot: every cell on every host, and pooled, with its exact interval.

It draws the judgement's own rows (rates and intervals come from the verdict layer; none
is computed here), so the figure cannot disagree with the tables.
"""

from __future__ import annotations

from matplotlib.ticker import PercentFormatter

from reprofleet.verdicts import ALL_HOSTS, Judgement
from reprofleet.report import plots


def forest_svg(judgement: Judgement) -> str:
    """Rows top to bottom in playbook order; pooled rows as diamonds; the reference shaded."""
    rows = list(judgement.rows)
    with plots.style():
        fig, ax = plots.figure(7.5, 0.8 + 0.24 * max(1, len(rows)))
        if not rows:
            plots.no_data(fig, ax, "no judged attempts")
            return plots.svg_of(fig, "forest plot of reproduction rates")
        labels = []
        for index, row in enumerate(rows):
            y = len(rows) - 1 - index
            pooled = row.host == ALL_HOSTS
            if row.reference:
                ax.axhspan(y - 0.5, y + 0.5, color="#fff8e1", linewidth=0)
            labels.append(f"{row.cell}{' (ref)' if row.reference else ''} · {'all hosts' if pooled else row.host}")
            if row.tally.judged == 0:
                ax.text(0.5, y, "nothing judged", va="center", ha="center", fontsize=6, color="#777777")
                continue
            colour = "#b71c1c" if row.tally.reproductions else "#1b5e20"
            ax.plot([row.rate.low, row.rate.high], [y, y], color=colour, linewidth=2.2 if pooled else 1.2,
                    linestyle="--" if row.approximate else "-")
            ax.plot([row.tally.reproductions / row.tally.judged], [y], marker="D" if pooled else "o",
                    markersize=6 if pooled else 4, color=colour)
            ax.text(1.02, y, f"{row.tally.reproductions}/{row.tally.judged}", va="center", fontsize=6,
                    transform=ax.get_yaxis_transform())
        ax.set_yticks(range(len(rows) - 1, -1, -1), labels, fontsize=7)
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.set_xlim(-0.02, 1.02)
        ax.xaxis.set_major_formatter(PercentFormatter(1.0))
        ax.grid(axis="x", color="#eeeeee")
        label = rows[0].rate.label()
        ax.set_xlabel(f"reproduction rate with its {label} interval (dashed: stopped early, approximate)")
        return plots.svg_of(fig, "forest plot of reproduction rates")
