"""Host patterns as Ansible expands host keys: ``name[:port]`` and ``[a:b(:step)]`` ranges.

A fleet of numbered workstations is written ``ws[01:16]``; both file formats accept
such keys, so their expansion (and its errors) live in one place.
"""

from __future__ import annotations

import ipaddress
import re
import string

from reprofleet.errors import InventoryError, Location

MAX_RANGE_HOSTS = 10_000  # hosts one pattern may name, nested ranges together

_RANGE = r"\[(?:[a-z]:[a-z]|[0-9]+:[0-9]+)(?::[0-9]+)?\]"
_LABEL = rf"(?:[\w]|{_RANGE})(?:[\w_-]|{_RANGE})*(?<![_-])"
_HOSTNAME = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$", re.I)
_BRACKETED_PORT = re.compile(r"^\[(.+)\]:([0-9]+)$")
_HOST_PORT = re.compile(r"^((?:[^:\[\]]|\[[^\]]*\])*):([0-9]+)$")


def expand_host_pattern(pattern: str, where: Location) -> tuple[list[str], int | None]:
    """``ws[01:03]:2222`` -> (["ws01", "ws02", "ws03"], 2222), as Ansible expands host keys."""
    address, port = pattern, None
    for regex in (_BRACKETED_PORT, _HOST_PORT):
        match = regex.match(address)
        if match:
            address, port = match.group(1), int(match.group(2))
    if not (_HOSTNAME.match(address) or _is_ipv6(address)):
        address, port = pattern, None  # Ansible keeps an unrecognised pattern whole
    names = expand_host_ranges(address, where) if "[" in address else [address]
    return names, port


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def expand_host_ranges(pattern: str, where: Location) -> list[str]:
    """Expand the first ``[begin:end(:step)]`` (numeric, zero-padded, or letters), recursively."""
    head, _, rest = pattern.partition("[")
    body, closed, tail = rest.partition("]")
    bounds = body.split(":")
    if not closed or len(bounds) not in (2, 3):
        raise InventoryError(where, f"host range in {pattern!r} must be [begin:end] or [begin:end:step]")
    begin, end = bounds[0] or "0", bounds[1]
    step = bounds[2] if len(bounds) == 3 else "1"
    if not end or not step.isdigit() or int(step) < 1:
        raise InventoryError(where, f"host range in {pattern!r} needs an end and a step of at least 1")
    values = _range_values(begin, end, int(step), pattern, where)
    names: list[str] = []
    for value in values:
        name = f"{head}{value}{tail}"
        names.extend(expand_host_ranges(name, where) if "[" in name else [name])
        if len(names) > MAX_RANGE_HOSTS:
            raise InventoryError(where, f"host range in {pattern!r} names more than {MAX_RANGE_HOSTS} hosts")
    return names


def _range_values(begin: str, end: str, step: int, pattern: str, where: Location) -> list[str]:
    letters = string.ascii_letters
    if len(begin) == 1 and len(end) == 1 and begin in letters and end in letters:
        if letters.index(begin) > letters.index(end):
            raise InventoryError(where, f"host range in {pattern!r} must have begin <= end")
        return list(letters[letters.index(begin) : letters.index(end) + 1 : step])
    if not (begin.isdigit() and end.isdigit()):
        raise InventoryError(where, f"host range in {pattern!r} must be numbers or single letters")
    width = len(begin) if begin.startswith("0") and len(begin) > 1 else 0
    if width and len(end) != width:
        raise InventoryError(where, f"host range in {pattern!r} must pad begin and end to one width")
    if int(begin) > int(end):
        raise InventoryError(where, f"host range in {pattern!r} must have begin <= end")
    if (int(end) - int(begin)) // step + 1 > MAX_RANGE_HOSTS:
        raise InventoryError(where, f"host range in {pattern!r} names more than {MAX_RANGE_HOSTS} hosts")
    return [str(n).zfill(width) for n in range(int(begin), int(end) + 1, step)]
