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

A stream is read one line at a time and only what the figure needs is kept (the last
minute's samples, the phases, the last log and kernel lines), so the memory a report takes
does not grow with its streams. A stream cut to its cap (records/stream_file.py) says so
under its figure.
"""

from __future__ import annotations

import html
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from matplotlib.patches import Patch

from reprofleet.model import PHASE_ORDER
from reprofleet.records.reader import RecordedAttempt
from reprofleet.records.stream_file import CUT, gap_of, stream_lines
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
WINDOW_SAMPLES = 20_000  # NVML samples kept of the last minute while reading (10 Hz makes 600)
PHASES_KEPT = 256  # phase lines kept while reading (a run enters a dozen)


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
    gaps: tuple[str, ...] = ()  # what the stream's writer cut or did not file (its markers' words)


@dataclass
class _Reading:
    """What one pass over a stream keeps: bounded whatever the stream's length."""

    lines: int = 0
    end: float | None = None  # the latest time a host line carries (the silence)
    latest: float | None = None  # the latest time of any line (a stream with no host line)
    samples: deque[tuple[float, dict[str, Any]]] = field(default_factory=lambda: deque(maxlen=WINDOW_SAMPLES))
    kernel: deque[tuple[float, str]] = field(default_factory=lambda: deque(maxlen=LAST_LOG_LINES))
    phases: deque[tuple[float, str]] = field(default_factory=lambda: deque(maxlen=PHASES_KEPT))
    logs: deque[str] = field(default_factory=lambda: deque(maxlen=LAST_LOG_LINES))
    gaps: dict[str, tuple[int, int]] = field(default_factory=dict)

    def take(self, line: dict[str, Any]) -> None:
        gap = gap_of(line)
        if gap is not None:
            self.gaps[gap[0]] = gap[1:]  # a later marker of the same kind counts every cut so far
        t = line.get("t")
        if not isinstance(t, (int, float)):
            return
        self.lines += 1
        self.latest = t if self.latest is None else max(self.latest, t)
        kind = line.get("k")
        if kind not in CONTROLLER_KINDS and line.get("by") != "controller":
            self.end = t if self.end is None else max(self.end, t)
        if kind == "nvml":
            self.samples.append((t, line))
        elif kind == "kmsg" and line.get("tags"):
            self.kernel.append((t, str(line.get("line", ""))))
        elif kind == "phase":
            self.phases.append((t, str(line.get("phase"))))
        elif kind == "log":
            self.logs.append(str(line.get("line", "")))
        while self.samples and self.end is not None and self.samples[0][0] < self.end - WINDOW_S:
            self.samples.popleft()  # older than the last minute before the latest host line

    def gap_words(self) -> tuple[str, ...]:
        words = {CUT: "cut from the middle of this stream to keep it under its cap (its head and last lines are kept)"}
        return tuple(f"{lines} lines ({size} bytes) "
                     f"{words.get(what, 'not filed: the campaign folder reached its cap')}"
                     for what, (lines, size) in sorted(self.gaps.items()))


def _read(path: Path) -> _Reading:
    reading = _Reading()
    for line in stream_lines(path):
        reading.take(line)
    return reading


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


def _phases(phases: Sequence[tuple[float, str]], start: float, end: float) -> tuple[PhaseBand, ...]:
    entries = sorted(phases)
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
    reading = _read(path)
    if not reading.lines or reading.latest is None:
        return replace(base, note=f"the stream {attempt.stream} has no lines", gaps=reading.gap_words())
    end = reading.end if reading.end is not None else reading.latest
    start = end - WINDOW_S
    series = []
    for key, label, unit, colour in SERIES:
        kept = thin([(t - end, float(line[key])) for t, line in reading.samples
                     if t >= start and isinstance(line.get(key), (int, float))], points)
        series.append(Series(key, label, unit, colour, tuple(p[0] for p in kept), tuple(p[1] for p in kept)))
    kernel = [text for t, text in reading.kernel if t >= start]
    note = "" if any(s.times for s in series) else "no NVML samples in the last minute"
    return replace(base, series=tuple(series), phases=_phases(reading.phases, start, end),
                   last_lines=tuple(reading.logs), kernel_lines=tuple(kernel), note=note, gaps=reading.gap_words())


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
    for gap in trace.gaps:
        parts.append(f'<p class="note">Stream: {html.escape(gap)}.</p>')
    lines = trace.last_lines or ((attempt.last_log_line,) if attempt.last_log_line else ())
    if lines:
        parts.append("<pre class=\"log\">" + "\n".join(html.escape(line[-240:]) for line in lines) + "</pre>")
    if trace.kernel_lines:
        parts.append("<pre class=\"log kernel\">" + "\n".join(html.escape(line[-240:]) for line in trace.kernel_lines)
                     + "</pre>")
    parts += _bmc_html(attempt.forensics)
    parts.append("</article>")
    return "\n".join(parts)
