"""Which row of an rPDU2 table is outlet N of chained PDU M: found by a walk, kept per PDU.

APC's daisy-chained PDUs (Network Port Sharing) answer for every outlet of the chain under
one flat index, the same for every host on that chain; each row's Module and Number columns
name its PDU and outlet (PowerNet-MIB rPDU2Outlet* tables; see ``snmp_oids``). The MIB gives
no formula (third-party notes show 24 outlets per PDU, which a 16-outlet PDU breaks), so the
index is read from the PDU: one walk of both columns of a table, kept for the process and
shared by every driver of that PDU, and dropped when a cell is missing (the chain changed).
"""

from __future__ import annotations

import threading
from typing import Iterable, Mapping

__all__ = ["RowIndex", "forget", "known", "remember", "rows_from_columns"]

RowIndex = Mapping[tuple[int, int], int]  # (module, outlet number) -> the table's row index
MAX_ROWS = 4 * 48  # four chained PDUs of 48 outlets: the walk's bound

_KNOWN: dict[tuple[str, str], RowIndex] = {}
_GUARD = threading.Lock()


def rows_from_columns(modules: Iterable[tuple[int, int]], numbers: Iterable[tuple[int, int]]) -> RowIndex:
    """``(index, module)`` and ``(index, number)`` cells of one table -> (module, number) -> index."""
    by_index = dict(modules)
    return {(module, number): index
            for index, number in numbers if (module := by_index.get(index)) is not None}


def known(device: str, table: str) -> RowIndex | None:
    with _GUARD:
        return _KNOWN.get((device, table))


def remember(device: str, table: str, rows: RowIndex) -> None:
    with _GUARD:
        _KNOWN[(device, table)] = dict(rows)


def forget(device: str) -> None:
    """The chain behind ``device`` may have changed: walk again next time."""
    with _GUARD:
        for key in [key for key in _KNOWN if key[0] == device]:
            del _KNOWN[key]
