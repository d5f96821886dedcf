"""Names that become file names: a host's, a group's, a cell's.

A host's name is its facts file (``facts/<host>.json``), its netconsole log
(``netconsole/<host>.jsonl``) and its bug-report folder; a name with ``/`` or ``..`` in it
would put a file anywhere the controller may write. So every such name matches
``[A-Za-z0-9._-]+`` and is neither ``.`` nor ``..``: refused where it is read (with the
file and line), and checked again by :func:`file_name` wherever a name is joined to a
folder, so a name that reached the controller another way (a stored record, a dynamic
inventory) never becomes a path either.

An IPv6 literal (``fe80::1``) is refused too rather than mapped to another file name: a
host's files are found by its name, and Ansible's own answer is an alias with the address
beside it (``gpu-a ansible_host=fe80::1``).
"""

from __future__ import annotations

import re

from reprofleet.errors import ReprofleetError

SAFE_NAME = re.compile(r"[A-Za-z0-9._-]+")
NAME_RULE = "letters, digits, '.', '_' and '-' only, and not '.' or '..'"


class UnsafeName(ReprofleetError):
    """A name that would become a path is not a plain file name."""


def is_safe_name(name: object) -> bool:
    """Whether ``name`` can be a file name as it is: no folder separator, no ``..``, no odd byte."""
    return isinstance(name, str) and SAFE_NAME.fullmatch(name) is not None and name not in (".", "..")


def unsafe_name_reason(name: object, what: str) -> str | None:
    """One line saying why ``name`` cannot be a file name (None when it can)."""
    if is_safe_name(name):
        return None
    return f"{what} {name!r} cannot be a file name: {NAME_RULE} (an address goes in ansible_host)" \
        if what == "host name" else f"{what} {name!r} cannot be a file name: {NAME_RULE}"


def file_name(name: str, suffix: str = "", *, what: str = "name") -> str:
    """``name`` + ``suffix`` as one file name of a folder; UnsafeName for any other name.

    The one place a name becomes a path: every writer of a host's or a cell's file goes
    through it, so a name that slipped past its loader still cannot leave the folder."""
    reason = unsafe_name_reason(name, what)
    if reason is not None:
        raise UnsafeName(reason)
    return f"{name}{suffix}"
