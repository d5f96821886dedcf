"""The kill -9 harness: a campaign controller as a real process, killed where a folder says so.

The controller is ``invoke campaign`` in its own session; a kill point is a predicate over
what the campaign folder holds right now (records, events, power log, streams, facts), and
the kill is ``SIGKILL`` to the controller's pid and its descendants, found by pid in /proc,
never by name. After the kill the campaign is resumed to completion and its folder is held
against one uninterrupted run of the same plan: the invariants a crash-safe resume keeps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from tests.support.paths import REPO

INVOKE = REPO / ".venv" / "bin" / "invoke"
RERUN_REASONS = ("interrupted", "not run")  # infra reasons of slots that run again on resume
POLL_S = 0.03


# -- reading a campaign folder ---------------------------------------------------------------
@dataclass(frozen=True)
class JsonlFile:
    """One JSONL file as its lines: the parsed entries, and every line that did not parse."""

    entries: tuple[dict[str, Any], ...]
    torn: tuple[tuple[int, str], ...]  # (line number, text) of lines that are not a JSON object

    @classmethod
    def read(cls, path: Path) -> "JsonlFile":
        """The file as it is now; parsed again only when its size or mtime moved since the last read
        (a kill point polls every few ms: re-parsing an unchanged events.jsonl each time took a CPU
        from the controller it watches and from the workers beside it)."""
        try:
            stat = path.stat()
        except FileNotFoundError:
            return cls((), ())
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        cached = _PARSED.get(str(path))
        if cached is not None and cached[0] == key:
            return cached[1]
        parsed = cls.parse(path)
        _PARSED[str(path)] = (key, parsed)
        return parsed

    @classmethod
    def parse(cls, path: Path) -> "JsonlFile":
        if not path.exists():
            return cls((), ())
        entries: list[dict[str, Any]] = []
        torn: list[tuple[int, str]] = []
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").split("\n"), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                torn.append((number, line[:120]))
                continue
            if isinstance(entry, dict):
                entries.append(entry)
            else:
                torn.append((number, line[:120]))
        return cls(tuple(entries), tuple(torn))


# path -> ((path, size, mtime_ns), its lines): the last parse of each file read (frozen, so shared safely)
_PARSED: dict[str, tuple[tuple[str, int, int], JsonlFile]] = {}


@dataclass(frozen=True)
class Snapshot:
    """What a campaign folder holds at one moment (the kill points' and the checks' view)."""

    root: Path
    attempts: JsonlFile
    events: JsonlFile
    power: JsonlFile
    streams: Mapping[str, int]  # attempt id -> stream file size
    facts: frozenset[str]  # hosts whose facts were written (prepare got that far)

    @classmethod
    def read(cls, root: Path) -> "Snapshot":
        streams: dict[str, int] = {}
        if (root / "streams").is_dir():
            for path in (root / "streams").iterdir():
                try:
                    streams[path.stem] = path.stat().st_size
                except FileNotFoundError:
                    continue
        facts = frozenset(p.stem for p in (root / "facts").glob("*.json")) if (root / "facts").is_dir() else frozenset()
        return cls(root, JsonlFile.read(root / "attempts.jsonl"), JsonlFile.read(root / "events.jsonl"),
                   JsonlFile.read(root / "power.jsonl"), streams, facts)

    @property
    def records(self) -> list[dict[str, Any]]:
        """Attempt records with their amendments (``{"amends": id, ...}`` lines) folded in."""
        by_id: dict[str, dict[str, Any]] = {}
        order: list[dict[str, Any]] = []
        for entry in self.attempts.entries:
            if "amends" in entry:
                target = by_id.get(str(entry["amends"]))
                if target is not None:
                    target.update({k: v for k, v in entry.items() if k not in ("amends", "schema", "amended")})
                    target["amended"] = True
                continue
            record = dict(entry)
            by_id[str(record.get("attempt"))] = record
            order.append(record)
        return order

    @property
    def record_lines(self) -> list[dict[str, Any]]:
        return [e for e in self.attempts.entries if "amends" not in e]

    def events_of(self, kind: str, **match: Any) -> list[dict[str, Any]]:
        return [e for e in self.events.entries
                if e.get("event") == kind and all(e.get(k) == v for k, v in match.items())]

    def recovery_to(self, state: str) -> list[dict[str, Any]]:
        return self.events_of("recovery", to=state)


def counts(records: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """Records per (host, cell) that count: slots interrupted or never run are re-run, not counted."""
    tally: Counter[tuple[str, str]] = Counter()
    for record in records:
        if record.get("outcome") == "infra" and str(record.get("reason", "")).startswith(RERUN_REASONS):
            continue
        tally[(str(record.get("host")), str(record.get("cell")))] += 1
    return dict(tally)


# -- the controller as a process -----------------------------------------------------------
def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (by parent pid in /proc), deepest last."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found, frontier = [], [pid]
    for _ in range(10000):
        if not frontier:
            break
        current = frontier.pop()
        for child in parents.get(current, []):
            found.append(child)
            frontier.append(child)
    return found


@dataclass
class Controller:
    """``invoke campaign`` running as its own session; output goes to a log file."""

    proc: subprocess.Popen[bytes]
    log: Path
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def start(cls, env: Mapping[str, str], inventory: Path, playbook: Path, log: Path,
              resume: Path | None = None) -> "Controller":
        argv = [str(INVOKE), "campaign", "--hosts", str(inventory), "--playbook", str(playbook)]
        argv += ["--resume", str(resume)] if resume is not None else []
        handle = open(log, "ab")
        try:
            proc = subprocess.Popen(argv, cwd=REPO, env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                                    stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            handle.close()
        return cls(proc, log)

    def kill9(self) -> list[int]:
        """SIGKILL the controller and what it started (by pid), as a power loss of its own would."""
        victims = [self.proc.pid, *descendants(self.proc.pid)]
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)
        return victims

    def wait(self, timeout_s: float) -> int:
        """Its exit status; killed (and the failure names the log) if it runs past ``timeout_s``."""
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError(f"the controller ran past {timeout_s:g} s; its output: {self.log}\n"
                                 + self.tail()) from None

    def tail(self, lines: int = 25) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def campaign_folder(reports: Path, deadline_s: float = 60.0) -> Path:
    """The one campaign folder under ``reports`` (waits until the controller made it)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        found = [p for p in reports.iterdir() if p.is_dir() and not p.name.startswith(".")] if reports.exists() else []
        if found:
            return found[0]
        time.sleep(POLL_S)
    raise AssertionError(f"no campaign folder under {reports} within {deadline_s:g} s")


# -- kill points --------------------------------------------------------------------------
Trigger = Callable[[Snapshot, Snapshot | None], bool]


@dataclass(frozen=True)
class KillPoint:
    """Where to kill: a predicate over the folder now (and at the previous poll)."""

    name: str
    trigger: Trigger
    torn_tail: bool = False  # then append half a record line, as a kill mid-append leaves it
    cache_push: bool = False  # the playbook seeds a big starting cache (prepare takes a moment)
    poll_s: float = POLL_S  # shorter where the window after the moment is short (the GPU restore)


def wait_and_kill(controller: Controller, reports: Path, point: KillPoint, deadline_s: float,
                  on_poll: Callable[[Snapshot], None] | None = None) -> Snapshot:
    """Poll the folder until the kill point's moment, SIGKILL, and return the folder as the kill left it.

    ``on_poll`` sees every snapshot first (a chain uses it to freeze a host when its moment needs a wedge).
    """
    root = campaign_folder(reports)
    deadline = time.monotonic() + deadline_s
    previous: Snapshot | None = None
    while time.monotonic() < deadline:
        if controller.proc.poll() is not None:
            raise AssertionError(f"{point.name}: the controller ended (rc {controller.proc.returncode}) before "
                                 f"the kill point\n{controller.tail()}")
        now = Snapshot.read(root)
        if on_poll is not None:
            on_poll(now)
        if point.trigger(now, previous):
            controller.kill9()
            if point.torn_tail:
                append_torn_half(root / "attempts.jsonl")
            return Snapshot.read(root)
        previous = now
        time.sleep(point.poll_s)
    controller.kill9()
    raise AssertionError(f"{point.name}: the kill point never came within {deadline_s:g} s\n{controller.tail()}")


def append_torn_half(path: Path) -> None:
    """Half of a copy of the last record, without its newline: what a kill mid-write leaves."""
    lines = [line for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
    half = lines[-1][: len(lines[-1]) // 2]
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(half)


# -- the invariants after a resume -----------------------------------------------------------
def broken_invariants(after: Snapshot, expected: Mapping[tuple[str, str], int]) -> list[str]:
    """Every way the resumed folder differs from what an uninterrupted run leaves (empty: none)."""
    problems: list[str] = []
    got = counts(after.records)
    if got != dict(expected):
        diff = {k: (got.get(k, 0), expected.get(k, 0)) for k in set(got) | set(expected)
                if got.get(k, 0) != expected.get(k, 0)}
        problems.append(f"records per (host, cell) differ from the uninterrupted run, (got, want): {diff}")
    ids = Counter(str(r.get("attempt")) for r in after.record_lines)
    twice = sorted(a for a, n in ids.items() if n > 1)
    if twice:
        problems.append(f"attempt ids recorded more than once: {twice}")
    by_id = {str(r.get("attempt")): r for r in after.records}
    for event in after.events_of("wedge"):
        record = by_id.get(str(event.get("attempt")))
        if record is None or record.get("outcome") not in ("wedge", "reboot"):
            line = next((n for n, e in enumerate(after.events.entries, 1) if e is event), "?")
            problems.append(f"lost wedge: events.jsonl entry {line} ({event.get('host')}, attempt "
                            f"{event.get('attempt')}) has no wedge/reboot record (found "
                            f"{None if record is None else (record.get('outcome'), record.get('reason'))})")
    identities: dict[tuple[str, str], set[str]] = {}
    for record in after.records:  # a resume must not split a cell: one identity per (host, cell)
        identities.setdefault((str(record.get("host")), str(record.get("cell"))), set()).add(
            str(record.get("cell_id")))
    split = {key: sorted(ids_) for key, ids_ in identities.items() if len(ids_) > 1}
    if split:
        problems.append(f"cells recorded under more than one identity on one host (a resume lost what ran): {split}")
    recorded = set(by_id)
    unrecorded = sorted(str(e.get("attempt")) for e in after.events_of("attempt_started")
                        if str(e.get("attempt")) not in recorded)
    if unrecorded:  # an attempt that ran while no controller watched, never recorded: evidence lost
        problems.append(f"attempts started and never recorded: {unrecorded}")
    for name, jsonl in (("attempts.jsonl", after.attempts), ("events.jsonl", after.events)):
        for number, text in jsonl.torn:
            problems.append(f"torn line {name}:{number}: {text!r}")
    return problems


def fleet_problems(hosts: Sequence[Any], defaults: Mapping[str, Any], deadline_s: float = 15.0) -> list[str]:
    """Every outlet on and every GPU at its defaults (read from the simulated hardware).

    A host still booting after the resume ended gets ``deadline_s`` to show its power state.
    """
    from reprofleet.sim.power.switch import read_switch

    problems: list[str] = []
    for host in hosts:
        if not read_switch(host.paths.power):
            problems.append(f"{host.name}: its outlet is off at the end")
        deadline = time.monotonic() + deadline_s
        while host.power != "on" and time.monotonic() < deadline:
            time.sleep(0.1)
        if host.power != "on":
            problems.append(f"{host.name}: powered {host.power} at the end")
        state = host.gpu_state()
        off = {k: (state.get(k), v) for k, v in defaults.items() if state.get(k) != v}
        if off:
            problems.append(f"{host.name}: GPU not at its defaults at the end, (now, default): {off}")
        left = host.ssh("docker ps -a -q --filter label=reprofleet.attempt")  # a container outlives its client
        if left.returncode != 0 or left.stdout.strip():
            problems.append(f"{host.name}: attempt containers left at the end: {left.stdout.split() or left.stderr}")
    return problems


def reset_host(host: Any, counter: Path) -> None:
    """A fresh boot (out of whatever the kill left: frozen, off, an orphan PoC) and the wedge
    script replayed from its first entry, so every kill point sees the same scripted wedges."""
    from reprofleet.sim.rfsim import hwio

    host.power_off(timeout_s=15.0)
    hwio.write_json(counter, {"count": 0})
    host.power_on(timeout_s=30.0)
