"""What differs between the two sides of a comparison: a cell and the reference it is compared with.

A comparison says something of the change only where the two sides differ in nothing else.
Within one interleaved campaign they ran side by side, under one image, PoC and driver; a
cell pooled against a reference from another campaign may have run a month later, under
another image digest, another PoC or another driver, and a campaign in ``order:
sequential`` ran the reference's attempts in one block of time and the cell's in another.
The sentence names each of these (:func:`sides`), and a comparison across campaigns is
never judged at a planned end: neither campaign planned it (the later one may exist because
of the earlier one's verdict), so it is anytime-valid (:attr:`Sides.across`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable, Iterable, Sequence

from reprofleet.records.host_stack import LABELS
from reprofleet.records.pooling import Pool
from reprofleet.verdicts.pairing import Pairing
from reprofleet.verdicts.tally import Judged, natural_key

GAP = timedelta(hours=1)  # time between the sides worth naming (an interleaved campaign has none)


@dataclass(frozen=True)
class Sides:
    """What differs between a comparison's sides: ``across`` the campaigns they ran in (the
    look's reason to be anytime-valid), and ``clauses``, every difference in words."""

    across: str = ""
    clauses: tuple[str, ...] = ()


def _when(text: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def _span(items: Sequence[Judged]) -> tuple[datetime, datetime] | None:
    times = [t for j in items for t in (_when(j.record.started), _when(j.record.ended or j.record.started)) if t]
    return (min(times), max(times)) if times else None


def _dates(span: tuple[datetime, datetime] | None) -> str:
    if span is None:
        return "dates unknown"
    first, last = (t.date().isoformat() for t in span)
    return first if first == last else f"{first} to {last}"


def _duration(delta: timedelta) -> str:
    hours = delta.total_seconds() / 3600
    return f"{hours / 24:.0f} days" if hours >= 48 else f"{hours:.0f} h"


def _short(value: str | None) -> str:
    if value is None:
        return "unknown"
    text = value.split(":", 1)[-1] if value.startswith("sha256:") else value
    return text[:12]


def _image(item: Judged) -> str | None:
    runtime = item.record.runtime
    value = runtime.get("image_digest") or runtime.get("image_id")
    return None if value is None else str(value)


def _values(items: Iterable[Judged], of: Callable[[Judged], str | None]) -> list[str | None]:
    return sorted({of(j) for j in items}, key=lambda v: natural_key(v or ""))


def _differs(label: str, cell: Sequence[Judged], reference: Sequence[Judged],
             of: Callable[[Judged], str | None], short: Callable[[str | None], str] = _short) -> str | None:
    ours, theirs = _values(cell, of), _values(reference, of)
    if ours == theirs or not any(ours + theirs):
        return None
    return (f"{label} {'/'.join(short(v) for v in ours)} for the cell, "
            f"{'/'.join(short(v) for v in theirs)} for the reference")


def _stack_value(key: str) -> Callable[[Judged], str | None]:
    return lambda j: j.record.stack.get(key)


def _plain(value: str | None) -> str:
    return value or "unknown"


def _timing(cell: Sequence[Judged], reference: Sequence[Judged], orders: set[str]) -> list[str]:
    out = []
    if "sequential" in orders:
        out.append("order: sequential: the cell's and the reference's attempts ran in separate blocks of time, "
                   "not interleaved (a drift in time reads as the cell's effect)")
    ours, theirs = _span(cell), _span(reference)
    if ours and theirs:
        earlier, later = (theirs, ours) if theirs[0] <= ours[0] else (ours, theirs)
        gap = later[0] - earlier[1]
        if gap >= GAP:
            first = "reference" if earlier is theirs else "cell"
            out.append(f"a gap of {_duration(gap)} between the sides (the {first}'s attempts ended "
                       f"{earlier[1].date().isoformat()}, the other's began {later[0].date().isoformat()})")
    return out


def sides(pairing: Pairing, judged: Sequence[Judged], pool: Pool) -> Sides:
    """What differs between ``pairing``'s cell and its reference, on the hosts compared."""
    hosts = set(pairing.hosts)
    cell = [j for j in judged if j.cell_id == pairing.cell_id and j.host in hosts]
    reference = [j for j in judged if j.host in hosts and pairing.reference_on.get(j.host) == j.cell_id]
    if not cell or not reference:
        return Sides()
    ours, theirs = _values(cell, lambda j: j.campaign), _values(reference, lambda j: j.campaign)
    across = ""
    if ours != theirs:
        across = (f"compared across campaigns: the cell ran in {', '.join(map(_plain, ours))} "
                  f"({_dates(_span(cell))}), the reference in {', '.join(map(_plain, theirs))} ({_dates(_span(reference))})")
    differences = [d for d in (
        _differs("image digest", cell, reference, _image),
        _differs("PoC digest", cell, reference, lambda j: j.record.poc),
        *(_differs(LABELS[key], cell, reference, _stack_value(key), _plain) for key in ("driver", "cuda", "kernel", "vbios")),
    ) if d]
    orders = {info.order for c in {j.campaign for j in cell + reference} if (info := pool.campaigns.get(c))}
    clauses = ([across] if across else []) + (["the sides differ in " + "; ".join(differences)] if differences else [])
    clauses += _timing(cell, reference, orders)
    return Sides(across, tuple(clauses))


__all__ = ["GAP", "Sides", "sides"]
