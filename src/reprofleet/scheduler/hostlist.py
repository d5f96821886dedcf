"""Slurm's host lists (``gpu[01-03,07],login1``) expanded to names, as ``scontrol show hostnames``
does, for ``-i slurm:nodes=...``; one bracket per name, which is what Slurm's own lists print."""

from __future__ import annotations

from reprofleet.errors import SchedulerError

__all__ = ["expand_hostlist"]

MAX_NAMES = 100_000  # a typo such as gpu[1-999999999] must not fill the controller's memory


def expand_hostlist(text: str) -> tuple[str, ...]:
    names: list[str] = []
    for item in _items(text):
        names.extend(_expand(item, text))
        if len(names) > MAX_NAMES:
            raise SchedulerError(f"host list {text!r}", f"more than {MAX_NAMES} names")
    return tuple(names)


def _items(text: str) -> list[str]:
    """Split at commas outside brackets."""
    items, depth, current = [], 0, ""
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth not in (0, 1):
            raise SchedulerError(f"host list {text!r}", "brackets do not pair")
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    if depth:
        raise SchedulerError(f"host list {text!r}", "an unclosed '['")
    items.append(current)
    return [item.strip() for item in items if item.strip()]


def _expand(item: str, text: str) -> list[str]:
    if "[" not in item:
        return [item]
    head, _, rest = item.partition("[")
    body, _, tail = rest.partition("]")
    if "[" in tail:
        raise SchedulerError(f"host list {text!r}", f"{item!r}: one bracket per name")
    names: list[str] = []
    for part in body.split(","):
        low, sep, high = part.partition("-")
        if not low.isdigit() or (sep and not high.isdigit()):
            raise SchedulerError(f"host list {text!r}", f"{part!r} is not a number or a range a-b")
        if sep and int(high) < int(low):
            raise SchedulerError(f"host list {text!r}", f"{part!r} counts down")
        width = len(low)
        names.extend(f"{head}{n:0{width}d}{tail}" for n in range(int(low), int(high if sep else low) + 1))
    return names
