"""What a host was doing in the last minute before it froze: one figure per wedge or reboot.

The stream is the controller's copy of the host's own lines, so its clock is the host's:
times are shown relative to the last line heard (0 s), which needs no clock agreement.
Samples are thinned to a few hundred points per series (fewer when there are many
wedges), and the figures share a byte budget, so a campaign with hundreds of wedges still
makes a report small enough to attach: when the budget runs out, every (cell, host) pair
has had its figures drawn in turn, and the wedges left over keep their text (phase, last
log and kernel lines) and name their stream file.

The wall power the host's PDU or BMC metered (the record's ``wall_trace``, on the
controller's clock, also relative to the silence) is drawn on the power axis beside the
GPU's own NVML power; where the device does not meter, the axis says so.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from matplotlib.patches import Patch

from reprofleet.model import PHASE_ORDER
from reprofleet.records.reader import RecordedAttempt
from reprofleet.verdicts import natural_key
from reprofleet.report import plots
from reprofleet.report.evidence import WallAtFreeze, bmc_words, wall_at_freeze, wall_words

WINDOW_S = 60.0
MAX_POINTS = 200
MIN_POINTS = 60
FIGURE_BUDGET_BYTES = 3_500_000  # of the 5 MB a report may weigh, what the per-wedge figures may use
LAST_LOG_LINES = 8
LAST_BMC_EVENTS = 20
SERIES = (("gfx_mhz", "graphics clock", "MHz", "#1565c0"), ("power_w", "power", "W", "#c62828"),
          ("temp_c", "temperature", "°C", "#ef6c00"))
WALL_COLOUR = "#6a1b9a"
CONTROLLER_KINDS = ("wall", "netconsole")  # lines the controller writes into the stream (controller clock), no silence


@dataclass(frozen=True)
class Series:
    key: str
    label: str
    unit: str
    colour: str
    times: tuple[float, ...]
    values: tuple[float, ...]


@dataclass(frozen=True)
class PhaseBand:
    phase: str
    start: float
    end: float


@dataclass(frozen=True)
class FreezeTrace:
    """The last ``WINDOW_S`` seconds of one attempt's stream, ready to draw."""

    attempt: str
    host: str
    cell: str
    outcome: str
    started: str
    series: tuple[Series, ...] = ()
    phases: tuple[PhaseBand, ...] = ()
    last_lines: tuple[str, ...] = ()
    kernel_lines: tuple[str, ...] = ()
    note: str = ""
    wall: WallAtFreeze = WallAtFreeze((), (), None, "")


def _read(path: Path) -> list[dict[str, Any]]:
    lines = []
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            line = json.loads(raw)
        except json.JSONDecodeError:
            continue  # a line torn by the freeze itself
        if isinstance(line, dict) and isinstance(line.get("t"), (int, float)):
            lines.append(line)
    return lines


def points_for(freezes: int) -> int:
    """Points per series: fewer when there are many wedges to draw."""
    return max(MIN_POINTS, min(MAX_POINTS, 30_000 // max(1, freezes)))


def thin(points: list[tuple[float, float]], limit: int = MAX_POINTS) -> list[tuple[float, float]]:
    """At most ``limit`` points, evenly spaced by index, always keeping the last one."""
    if len(points) <= limit:
        return points
    step = len(points) / (limit - 1)
    kept = [points[int(i * step)] for i in range(limit - 1)]
    return kept + [points[-1]]


def _phases(lines: list[dict[str, Any]], start: float, end: float) -> tuple[PhaseBand, ...]:
    entries = sorted((line["t"], str(line.get("phase"))) for line in lines if line.get("k") == "phase")
    bands = []
    for index, (t, phase) in enumerate(entries):
        t_next = entries[index + 1][0] if index + 1 < len(entries) else end
        if t_next >= start:
            bands.append(PhaseBand(phase, max(t, start) - end, t_next - end))
    return tuple(bands)


def load_trace(record: Mapping[str, Any], path: Path | None, points: int = MAX_POINTS) -> FreezeTrace:
    """The trace of one wedge or reboot (``record``: typed, or its JSON line); a missing or
    empty stream is a note, not an error."""
    attempt = RecordedAttempt.from_json(record)
    base = FreezeTrace(attempt=attempt.attempt, host=attempt.host, cell=attempt.cell, outcome=attempt.outcome,
                       started=str(attempt.started), wall=wall_at_freeze(attempt))
    if path is None:
        return replace(base, note=f"no stream file for this attempt ({attempt.stream or 'none recorded'})")
    lines = _read(path)
    if not lines:
        return replace(base, note=f"the stream {attempt.stream} has no lines")
    heard = [line["t"] for line in lines if line.get("k") not in CONTROLLER_KINDS]
    end = max(heard) if heard else max(line["t"] for line in lines)
    start = end - WINDOW_S
    recent = [line for line in lines if line["t"] >= start]
    series = []
    for key, label, unit, colour in SERIES:
        kept = thin([(line["t"] - end, float(line[key])) for line in recent
                     if line.get("k") == "nvml" and isinstance(line.get(key), (int, float))], points)
        series.append(Series(key, label, unit, colour, tuple(p[0] for p in kept), tuple(p[1] for p in kept)))
    logs = [str(line.get("line", "")) for line in lines if line.get("k") == "log"]
    kernel = [str(line.get("line", "")) for line in recent if line.get("k") == "kmsg" and line.get("tags")]
    note = "" if any(s.times for s in series) else "no NVML samples in the last minute"
    return replace(base, series=tuple(series), phases=_phases(lines, start, end),
                       last_lines=tuple(logs[-LAST_LOG_LINES:]), kernel_lines=tuple(kernel[-LAST_LOG_LINES:]),
                       note=note)


def _phase_colour(phase: str) -> str:
    index = PHASE_ORDER.index(phase) if phase in PHASE_ORDER else len(PHASE_ORDER) - 1
    return plots.PHASE_COLOURS[index % len(plots.PHASE_COLOURS)]


def freeze_svg(trace: FreezeTrace) -> str:
    """Clock, power and temperature over the last minute, vLLM phases as coloured bands."""
    with plots.style():
        fig, axes = plots.figure(7.5, 4.0, rows=len(SERIES), sharex=True,
                                 margins={"left": 0.1, "right": 0.98, "top": 0.92, "bottom": 0.24, "hspace": 0.15})
        for ax, series in zip(axes, trace.series or tuple(Series(*s, (), ()) for s in SERIES)):
            for band in trace.phases:
                ax.axvspan(band.start, band.end, color=_phase_colour(band.phase), linewidth=0)
            if series.times:
                ax.plot(series.times, series.values, color=series.colour, linewidth=1.1,
                        label="GPU (NVML)" if series.key == "power_w" else None)
            if series.key == "power_w":
                _draw_wall(ax, trace.wall)
            ax.set_ylabel(f"{series.label}\n({series.unit})", fontsize=7)
            ax.axvline(0.0, color="#000000", linewidth=0.8, linestyle=":")
        shown = list(dict.fromkeys(band.phase for band in trace.phases))
        if shown:
            handles = [Patch(facecolor=_phase_colour(p), edgecolor="#999999", label=p.replace("_", " ")) for p in shown]
            fig.legend(handles=handles, loc="lower center", ncol=min(len(shown), 5), fontsize=6,
                       frameon=False, title="vLLM phase", title_fontsize=6)
        earliest = min((t for s in trace.series for t in s.times[:1]), default=-WINDOW_S)
        latest = max((t for t, _ in trace.wall.after), default=0.0)  # the frozen host still drawing power
        axes[-1].set_xlim(max(-WINDOW_S, earliest - 1.0), min(WINDOW_S, latest) + 1.0)
        axes[-1].set_xlabel("seconds before the last line heard from the host (0 = silence)")
        fig.suptitle(f"{trace.host} · {trace.cell} · {trace.outcome}", fontsize=9)
        return plots.svg_of(fig, f"last minute before the {trace.outcome} on {trace.host} ({trace.cell})")


def _draw_wall(ax: Any, wall: WallAtFreeze) -> None:
    """The wall trace on the power axis, or a plain note that there is none."""
    if wall.points:
        ax.plot([t for t, _ in wall.points], [w for _, w in wall.points], color=WALL_COLOUR, linewidth=1.1,
                linestyle="--", marker=".", markersize=2, label="wall (PDU/BMC)")
        ax.legend(loc="upper left", fontsize=5, frameon=False)
    elif wall.note:
        ax.text(0.01, 0.92, wall.note, transform=ax.transAxes, fontsize=5, color=WALL_COLOUR, va="top")


def _bmc_html(forensics: Mapping[str, Any]) -> list[str]:
    """The BMC's entries since the attempt started (time, severity, message), and why any are missing."""
    if "bmc_events" not in forensics:
        return []
    events = [e for e in forensics.get("bmc_events") or [] if isinstance(e, Mapping)][-LAST_BMC_EVENTS:]
    rows = [f"{e.get('time')}  {str(e.get('severity')):<8}  {e.get('message')}  [{e.get('source')}]" for e in events]
    rows += [f"note: {note}" for note in forensics.get("bmc_notes") or []]
    return [f"<p class=\"meta\">BMC event log since the attempt started: {html.escape(bmc_words(forensics))}</p>",
            "<pre class=\"log bmc\">" + "\n".join(html.escape(row[:300]) for row in rows) + "</pre>"] if rows else \
        [f"<p class=\"meta\">BMC event log since the attempt started: no entries</p>"]


def drawable(trace: FreezeTrace) -> bool:
    return bool(trace.series) and not trace.note


def draw_within_budget(traces: Sequence[FreezeTrace], budget: int = FIGURE_BUDGET_BYTES) -> dict[str, str]:
    """Figures by attempt, drawn round-robin over (cell, host) pairs until the byte budget is spent."""
    groups: dict[tuple[str, str], list[FreezeTrace]] = {}
    for trace in traces:
        if drawable(trace):
            groups.setdefault((trace.cell, trace.host), []).append(trace)
    queues = [groups[key] for key in sorted(groups, key=lambda k: (k[0], natural_key(k[1])))]
    drawn: dict[str, str] = {}
    used = 0
    for turn in range(max((len(q) for q in queues), default=0)):
        for queue in queues:
            if turn < len(queue) and used < budget:
                svg = freeze_svg(queue[turn])
                drawn[queue[turn].attempt] = svg
                used += len(svg)
    return drawn


def freeze_html(trace: FreezeTrace, record: Mapping[str, Any], svg: str | None) -> str:
    """One wedge: its figure (or why there is none) and the last log lines under it.
    ``record``: typed, or its JSON line."""
    attempt = RecordedAttempt.from_json(record)
    latency = attempt.detect_latency_s
    facts = [f"attempt <code>{html.escape(trace.attempt)}</code>", f"started {html.escape(trace.started)}",
             f"last phase <b>{html.escape(str(attempt.last_phase or '—'))}</b>",
             f"declared {latency:.1f} s after the last line" if isinstance(latency, (int, float)) else "",
             f"wall power: {html.escape(wall_words(trace.wall))}" if trace.wall.points or trace.wall.note else ""]
    parts = [f'<article class="freeze" id="freeze-{html.escape(trace.attempt)}">',
             f"<h3>{html.escape(trace.host)} · {html.escape(trace.cell)} · "
             f'<span class="o-{html.escape(trace.outcome)}">{html.escape(trace.outcome)}</span></h3>',
             f"<p class=\"meta\">{' · '.join(f for f in facts if f)}</p>"]
    if svg is not None:
        parts.append(f'<figure class="plot">{svg}</figure>')
    elif drawable(trace):
        parts.append(f'<p class="note">Figure left out to keep this file small enough to attach (other wedges of '
                     f'this cell and host are drawn); its stream is {html.escape(str(attempt.stream))}.</p>')
    if trace.note:
        parts.append(f'<p class="note">{html.escape(trace.note)}</p>')
    lines = trace.last_lines or ((attempt.last_log_line,) if attempt.last_log_line else ())
    if lines:
        parts.append("<pre class=\"log\">" + "\n".join(html.escape(line[-240:]) for line in lines) + "</pre>")
    if trace.kernel_lines:
        parts.append("<pre class=\"log kernel\">" + "\n".join(html.escape(line[-240:]) for line in trace.kernel_lines)
                     + "</pre>")
    parts += _bmc_html(attempt.forensics)
    parts.append("</article>")
    return "\n".join(parts)
