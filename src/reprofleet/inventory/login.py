"""Host names, addresses and users: values an ``ssh`` command line must read as data.

Why: the system ``ssh`` reads an argument that starts with ``-`` as an option, so an
inventory (a CMDB export, cloud tags) whose ``ansible_host`` is ``-oProxyCommand=...``
would run a command on the controller; whitespace, NUL and control characters split or
truncate an argument, a log line or a known_hosts line. The argv also puts ``--`` before
the login (``remote/ssh.py``); this check makes such an inventory fail at load, with one
line naming file, line and field, before anything runs.
"""

from __future__ import annotations

import unicodedata

from reprofleet.errors import InventoryError, Location


def login_value_problem(value: str) -> str | None:
    """What makes ``value`` unusable as a host name, address or user; None when it is fine."""
    if value.startswith("-"):
        return "starts with '-', which ssh would read as an option"
    for char in value:
        if char == "\0":
            return "holds a NUL byte"
        if char.isspace():
            return "holds whitespace"
        if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
            return f"holds the control character U+{ord(char):04X}"
    return None


def check_login_value(value: str, where: Location, what: str) -> str:
    """``value`` unchanged, or an InventoryError naming where it was written and what is wrong."""
    problem = login_value_problem(value)
    if problem is not None:
        # ascii(): the value itself may hold the newline or escape that makes it wrong.
        raise InventoryError(where, f"{what} {ascii(value)} {problem}; it must be a plain name")
    return value
