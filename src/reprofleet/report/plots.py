"""Matplotlib figures as inline SVG: the one place the report's drawing settings live.

Every figure goes through :func:`svg_of`, which renders with the Agg-free SVG backend,
keeps text as text (no embedded glyph outlines: smaller, searchable, printable), fixes the
ids and drops the date so the same records always give byte-identical figures (two
controllers' copies of one campaign must give the same report as one merged folder), and
rounds coordinates to what a screen can show, which keeps a 1000-attempt report small.
"""

from __future__ import annotations

import io
import re
from typing import Any

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402  (after the backend is chosen)
from matplotlib.patches import Patch  # noqa: E402

from reprofleet.model import Outcome  # noqa: E402

OUTCOME_COLOURS = {
    "clean": "#2e7d32", "error": "#f9a825", "hang": "#8e24aa",
    "wedge": "#c62828", "reboot": "#ef6c00", "power_loss": "#5d4037", "infra": "#9e9e9e",
}
OUTCOME_ORDER = tuple(o.value for o in Outcome)  # clean ... wedge, reboot, power_loss, infra
# One light colour per vLLM phase in engine order; CUDA-graph capture (the phase at risk) is the red one.
PHASE_COLOURS = ("#e3f2fd", "#fff9c4", "#ffe0b2", "#e1bee7", "#c8e6c9", "#f8bbd0", "#b2ebf2", "#ffcdd2", "#d7ccc8")
_NUMBER = re.compile(r"(?<![\w.])(-?\d+\.\d{3,})(?![\w.])")  # coordinates; labels rarely have 3 decimals
_RC: Any = {"svg.fonttype": "none", "svg.hashsalt": "reprofleet", "font.size": 8.0, "font.family": "sans-serif",
       "font.sans-serif": ["DejaVu Sans"],  # one name per text element, not matplotlib's list of ten
       "axes.spines.top": False, "axes.spines.right": False, "path.simplify": True,
       # Labels carry what hosts printed (phases, log lines); a "$...$" there must stay text, never
       # mathtext, which raises on what it cannot parse and would take report.html down with it.
       "text.parse_math": False}


def style() -> Any:
    """The report's drawing settings; draw a whole figure inside ``with style():``."""
    return matplotlib.rc_context(_RC)


def figure(width_in: float, height_in: float, rows: int = 1, sharex: bool = False,
           margins: dict[str, float] | None = None) -> tuple[Figure, Any]:
    """A figure outside pyplot's global state (no GUI, safe in threads), with its axes.

    ``margins`` (fractions, as ``subplots_adjust`` takes them) skip the constrained layout:
    the figures drawn once per wedge use them, as the layout solver costs more than drawing.
    """
    fig = Figure(figsize=(width_in, height_in), layout=None if margins else "constrained")
    if margins:
        fig.subplots_adjust(**margins)
    axes = fig.subplots(rows, 1, sharex=sharex, squeeze=False)[:, 0]
    return fig, (axes[0] if rows == 1 else list(axes))


def _round(match: re.Match[str]) -> str:
    return f"{float(match.group(1)):.1f}".rstrip("0").rstrip(".")


def svg_of(fig: Figure, title: str) -> str:
    """The figure as an ``<svg>`` element to inline: no XML prolog, a title, stable bytes."""
    buffer = io.StringIO()
    with matplotlib.rc_context(_RC):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    text = _NUMBER.sub(_round, text)
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    text = re.sub(r' transform="rotate\(-?0 [^)]*\)"', "", text)  # a no-op rotation on every tick label
    text = re.sub(r">\s+<", "><", text)  # indentation between elements
    text = re.sub(r"\s*\n\s*", " ", text)  # line breaks inside path data
    return text.replace(">", f" role=\"img\" aria-label=\"{_attr(title)}\">", 1)


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def no_data(fig: Figure, ax: Any, message: str) -> None:
    """An empty plot still says why it is empty (a blank figure reads as a bug)."""
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="#555555")
    ax.set_xticks([])
    ax.set_yticks([])


def swatch(outcome: str) -> Patch:
    """A legend entry for an outcome colour."""
    return Patch(facecolor=OUTCOME_COLOURS.get(outcome, "#000000"), label=outcome)
