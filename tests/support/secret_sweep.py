"""The secrets sweep: every place a secret could land, searched for every secret.

Shared by the fleet test (tests/fleet/test_power_fleet_trust.py) and its unit tests
(tests/unit/test_secret_sweep.py), which show that each search finds a planted secret: a sweep
that cannot find anything proves nothing.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Iterable, Mapping


def leaks(texts: Mapping[str, str], secrets: Iterable[str]) -> list[tuple[str, str]]:
    """(where, secret) for every secret found in any text."""
    wanted = [s for s in secrets if s]
    return [(where, secret) for where, text in texts.items() for secret in wanted if secret in text]


def files_under(*roots: Path, skip: Iterable[Path] = ()) -> dict[str, str]:
    """Every regular file under ``roots`` (links not followed), as text; ``skip`` folders left out."""
    skipped = [p.resolve() for p in skip]
    found: dict[str, str] = {}
    for root in roots:
        for path in root.rglob("*"):
            if path.is_symlink() or not path.is_file() or any(s in path.resolve().parents for s in skipped):
                continue
            try:
                found[str(path)] = path.read_bytes().decode(errors="replace")
            except OSError:
                continue
    return found


def command_lines() -> dict[str, str]:
    """What ``ps -ef`` would show: every process's argv on this machine (the simulated hosts share it)."""
    found: dict[str, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[f"ps {entry.name}"] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
    return found


def environ_values(variable: str, command_holds: str, lines: Mapping[str, str] | None = None) -> set[str]:
    """The values of ``variable`` in the environment of every process whose command line holds
    ``command_holds``: where a secret must be (the PoC's own process, in its container).
    ``lines``: a reading of :func:`command_lines` already made (else one is made)."""
    found: set[str] = set()
    prefix = variable.encode() + b"="
    for where, line in (command_lines() if lines is None else lines).items():
        if command_holds not in line:
            continue
        try:
            environ = Path("/proc", where.removeprefix("ps "), "environ").read_bytes()
        except OSError:
            continue
        found.update(item[len(prefix):].decode(errors="replace") for item in environ.split(b"\0")
                     if item.startswith(prefix))
    return found


class PsSweep:
    """Reads every command line every ``interval_s`` while a campaign runs; keeps those holding a
    secret. With ``environ``, (variable, command line part), it also keeps the values that
    variable had in the environment of the processes whose command line holds that part."""

    def __init__(self, secrets: Iterable[str], interval_s: float = 0.05,
                 environ: tuple[str, str] | None = None) -> None:
        self.secrets = [s for s in secrets if s]
        self.interval_s = interval_s
        self.environ = environ
        self.rounds = 0
        self.found: list[tuple[str, str]] = []
        self.environ_found: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ps-sweep", daemon=True)

    def __enter__(self) -> "PsSweep":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            lines = command_lines()  # one reading of /proc a round, for both searches
            self.found += leaks(lines, self.secrets)
            if self.environ is not None:
                self.environ_found |= environ_values(*self.environ, lines=lines)
            self.rounds += 1
            self._stop.wait(self.interval_s)
