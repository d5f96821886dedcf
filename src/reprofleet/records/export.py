"""``invoke export``: one row per attempt, amendments folded, for pandas, jq, a spreadsheet.

attempts.jsonl is an append-only log: a wedge is written when it is declared, and what
recovery learns later arrives as amendment lines (``{"amends": id, ...}``), so reading it
as a table gives a row per line, not per attempt (44 rows for the demo's 36 attempts).
Export reads each attempt with its amendments folded (``reader.read_attempts``), pools the paths like
a report does (the same attempt in two copies once; two differing copies are an error), adds
each attempt's role under its own campaign's rules, and writes:

- ``jsonl``: each folded record whole, one JSON object a line (nested fields as they are);
- ``csv`` and ``parquet``: flat columns, the common ones first; a nested field (factors,
  policy, telemetry, forensics ...) is its JSON text, so every row has the same columns and
  types. Parquet needs pyarrow (the ``export`` extra). A text cell there never starts a formula
  (records/csv_cells.py: a host's text goes to spreadsheets); numbers stay numbers.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from enum import Enum, unique
from pathlib import Path
from typing import IO, Any, Iterable, Mapping, Sequence

import jsonlines

from reprofleet.errors import ReprofleetError
from reprofleet.model import outcome_counts
from reprofleet.records.csv_cells import spreadsheet_cell
from reprofleet.records.pooling import Pool


class ExportError(ReprofleetError):
    """An export cannot be written as asked."""


@unique
class ExportFormat(str, Enum):
    CSV = "csv"
    PARQUET = "parquet"
    JSONL = "jsonl"


@dataclass(frozen=True)
class Exported:
    """What ``invoke export --out FILE`` wrote (``--json``: docs/schema/export.schema.json)."""

    format: ExportFormat
    out: Path
    attempts: int  # rows written: one per attempt, its amendments folded
    sources: tuple[str, ...]  # the folders or attempts files read
    outcomes: Mapping[str, int] = field(default_factory=dict)  # rows written by outcome

    def to_json(self) -> dict[str, Any]:
        return {"format": self.format.value, "out": str(self.out), "attempts": self.attempts,
                "outcomes": outcome_counts(self.outcomes), "columns_leading": list(LEADING),
                "sources": list(self.sources)}


# Columns every row has, in this order; any other key of a record follows, sorted.
LEADING = ("campaign", "attempt", "controller", "host", "cell", "cell_id", "attempt_index", "attempt_in_boot",
           "cold_boot", "boot_id", "started", "ended", "duration_s", "outcome", "role", "role_reason", "reason",
           "detect_latency_s", "last_phase", "phase_note", "last_log_line", "exit_code", "amended", "stream")
INTEGERS = frozenset({"attempt_index", "attempt_in_boot", "exit_code", "forged_lines", "schema"})
FLOATS = frozenset({"duration_s", "detect_latency_s"})
BOOLEANS = frozenset({"cold_boot", "amended"})


def folded(pool: Pool) -> list[dict[str, Any]]:
    """Every attempt once, its amendments folded, with ``role`` (its campaign's rules), why it has
    that role (``role_reason``, empty for a reproduction or a non-reproduction: a ``power_loss``'s
    words, an orderly reboot's "orderly reboot (...): not a reproduction", a slot's infra reason) and ``duration_s``; ``amended`` is
    whether any amendment completed it. Every key of the record's line is kept, a key this
    version does not know included. Ordered by campaign, then start time."""
    out = []
    for record in sorted(pool.records, key=lambda r: (r.campaign, str(r.started), r.attempt)):
        try:
            classified = record.classified(pool.judging_of(record))
            role: str | None = classified.role.value
            why: str | None = classified.reason
        except ValueError:
            role = why = None  # an outcome this version does not know: exported, not judged
        out.append({**record.line, "role": role, "role_reason": why, "duration_s": record.duration_s(),
                    "amended": record.amended})
    return out


def columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    keys = {k for row in rows for k in row}
    return [c for c in LEADING] + sorted(keys - set(LEADING))


def flat(value: Any) -> Any:
    """A cell of a flat table: scalars as they are, anything nested as its JSON text."""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    return value


def write_jsonl(rows: Iterable[Mapping[str, Any]], out: IO[str]) -> int:
    writer = jsonlines.Writer(out, compact=True, sort_keys=True, flush=True)
    count = 0
    for row in rows:
        writer.write(dict(row))
        count += 1
    return count


def write_csv(rows: Sequence[Mapping[str, Any]], out: IO[str]) -> int:
    names = columns(rows)
    writer = csv.DictWriter(out, fieldnames=names, extrasaction="raise", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({name: spreadsheet_cell(flat(row.get(name))) for name in names})
    return len(rows)


def _typed(name: str, value: Any) -> Any:
    if value is None:
        return None
    if name in INTEGERS:
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if name in FLOATS:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if name in BOOLEANS:
        return bool(value)
    flattened = flat(value)
    return spreadsheet_cell(flattened if isinstance(flattened, str) else json.dumps(flattened))


def write_parquet(rows: Sequence[Mapping[str, Any]], path: Path) -> int:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ExportError("--format parquet needs pyarrow: pip install 'reprofleet[export]'") from None
    names = columns(rows)

    def kind(name: str) -> Any:
        return pa.int64() if name in INTEGERS else pa.float64() if name in FLOATS else \
            pa.bool_() if name in BOOLEANS else pa.string()

    schema = pa.schema([(name, kind(name)) for name in names])
    table = pa.table({name: [_typed(name, row.get(name)) for row in rows] for name in names}, schema=schema)
    pq.write_table(table, path)
    return len(rows)
