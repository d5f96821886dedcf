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


class PsSweep:
    """Reads every command line every ``interval_s`` while a campaign runs; keeps those holding a secret."""

    def __init__(self, secrets: Iterable[str], interval_s: float = 0.05) -> None:
        self.secrets = [s for s in secrets if s]
        self.interval_s = interval_s
        self.rounds = 0
        self.found: list[tuple[str, str]] = []
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
            self.found += leaks(command_lines(), self.secrets)
            self.rounds += 1
            self._stop.wait(self.interval_s)
