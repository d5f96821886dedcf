"""Prometheus's text format, as node_exporter's textfile collector reads it, and back.

The collector reads ``*.prom`` files from one folder on every scrape: each metric family as
``# HELP``, ``# TYPE`` and its samples, label values escaped (backslash, double quote,
newline; any other control and escape sequence removed first: records/host_text.py), no
timestamps (the collector refuses them), the file replaced whole (a reader must never see half
of it: ``records.store.write_atomic`` writes beside it and renames). The controller's own
``running`` and ``last update`` gauges are its heartbeat: ``invoke status`` reads them back here
instead of touching the campaign's lock.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from reprofleet.records.host_text import inert

RUNNING = "reprofleet_campaign_running"
UPDATED = "reprofleet_campaign_last_update_timestamp_seconds"
NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


@dataclass(frozen=True)
class Sample:
    labels: tuple[tuple[str, str], ...]
    value: float


@dataclass(frozen=True)
class Family:
    """One metric: its name, help, type (counter | gauge) and samples."""

    name: str
    help: str
    kind: str
    samples: tuple[Sample, ...]


def sample(value: float, **labels: str) -> Sample:
    return Sample(tuple(labels.items()), float(value))


def _escape_label(value: str) -> str:
    """A label value as the exposition format quotes it: backslash, double quote and newline escaped."""
    return inert(value, keep_lines=True).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return inert(text, keep_lines=True).replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def render(families: Sequence[Family]) -> str:
    """The text of a .prom file; a bad name or kind is a bug (ValueError), never a file."""
    lines: list[str] = []
    for family in families:
        if not NAME.match(family.name) or family.kind not in ("counter", "gauge"):
            raise ValueError(f"metric {family.name!r} of kind {family.kind!r}")
        lines += [f"# HELP {family.name} {_escape_help(family.help)}", f"# TYPE {family.name} {family.kind}"]
        for item in family.samples:
            if not all(LABEL.match(k) for k, _ in item.labels):
                raise ValueError(f"metric {family.name}: label names {[k for k, _ in item.labels]}")
            labels = ",".join(f'{k}="{_escape_label(v)}"' for k, v in item.labels)
            lines.append(f"{family.name}{{{labels}}} {_number(item.value)}" if labels
                         else f"{family.name} {_number(item.value)}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Heartbeat:
    """What the controller last wrote about itself: running or not, and when."""

    running: bool
    updated: float | None  # unix time


def _gauge(text: str, name: str) -> float | None:
    match = re.search(rf"^{name}(?:\{{[^\n]*\}})? (\S+)$", text, re.MULTILINE)
    try:
        return float(match.group(1)) if match else None
    except ValueError:
        return None


def read_heartbeat(path: Path) -> Heartbeat | None:
    """The running flag and time of a metrics.prom; None when there is none (an older controller's
    folder, or one that never started)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    running = _gauge(text, RUNNING)
    return None if running is None else Heartbeat(running == 1.0, _gauge(text, UPDATED))

