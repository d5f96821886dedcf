"""``invoke export`` below the command line: the pooled records as rows, in a file or returned.

The rows and their formats are ``records/export.py``'s; here they are read from the folders
asked for and written where asked, a file replaced whole (a Parquet file through a temporary
file beside it), or handed back as text for stdout.
"""

from __future__ import annotations

import io
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprofleet.errors import UsageError
from reprofleet.records.export import ExportFormat, Exported, folded, write_csv, write_jsonl, write_parquet
from reprofleet.records.pooling import load_pool
from reprofleet.records.store import write_atomic

__all__ = ["ExportFormat", "ExportRequest", "ExportedRows", "export_rows"]  # the formats too: one import for the CLI


@dataclass(frozen=True)
class ExportRequest:
    """What to read, in which format, and the file (None: the rows are returned as text)."""

    sources: tuple[Path, ...]
    format: ExportFormat
    out: Path | None = None


@dataclass(frozen=True)
class ExportedRows:
    """How many rows; ``exported``: the file written (None: none), ``text``: the rows otherwise."""

    attempts: int
    exported: Exported | None = None
    text: str | None = None


def export_rows(request: ExportRequest) -> ExportedRows:
    """One row per attempt, amendments folded, written to ``out`` or returned as text."""
    rows = folded(load_pool(request.sources))
    if request.format is ExportFormat.PARQUET:
        if request.out is None:
            raise UsageError("--format parquet writes a file: give --out FILE.parquet")
        temp = request.out.with_name(f".{request.out.name}.{os.getpid()}.tmp")
        try:
            write_parquet(rows, temp)
            os.replace(temp, request.out)
        finally:
            temp.unlink(missing_ok=True)
        return ExportedRows(len(rows), _exported(request, rows))
    buffer = io.StringIO()
    (write_csv if request.format is ExportFormat.CSV else write_jsonl)(rows, buffer)
    if request.out is None:
        return ExportedRows(len(rows), text=buffer.getvalue())
    write_atomic(request.out, buffer.getvalue())
    return ExportedRows(len(rows), _exported(request, rows))


def _exported(request: ExportRequest, rows: list[dict[str, Any]]) -> Exported:
    assert request.out is not None
    return Exported(request.format, request.out, len(rows), tuple(map(str, request.sources)),
                    Counter(str(row.get("outcome")) for row in rows))
