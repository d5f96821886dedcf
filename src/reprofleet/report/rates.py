"""Every cell's rate on each host and pooled, as ``invoke report --json`` prints them.

The verdicts carry one pooled rate per cell; a reader who wants to plot or compare hosts
needs each host's own count and interval, exactly the rows the terminal and report.md
show (``verdicts.Row``), with the interval's kind, and whether it is valid at this look.
"""

from __future__ import annotations

from typing import Any

from reprofleet.model import outcome_counts
from reprofleet.verdicts import ALL_HOSTS, Judgement
from reprofleet.verdicts.verdict import interval_json


def rates_json(judgement: Judgement) -> list[dict[str, Any]]:
    """One entry per (cell, host) row, and one per cell over all its hosts (``host``: null)."""
    out = []
    for row in judgement.rows:
        tally = row.tally
        out.append({
            "cell": row.cell, "cell_id": row.cell_id, "host": None if row.host == ALL_HOSTS else row.host,
            "reference": row.reference, "reproductions": tally.reproductions, "judged": tally.judged,
            "clean": tally.clean, "at_risk": tally.at_risk, "excluded": tally.excluded, "not_run": tally.not_run,
            "early": tally.early, "outcomes": outcome_counts(tally.outcomes),  # every outcome, power_loss included, 0 or not
            "rate": tally.reproductions / tally.judged if tally.judged else None,
            "interval": interval_json(row.rate),
            "approximate": row.approximate,  # a look before the planned end: this fixed-n interval is not valid
            "mix": row.mix,  # pooled over hosts that differ: this fleet's mix, not one rate
        })
    return out
