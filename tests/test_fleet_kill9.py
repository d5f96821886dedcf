"""An overnight campaign survives ``kill -9`` of its controller, wherever it lands.

The controller runs as ``invoke campaign`` in its own process; the test watches the
campaign folder, SIGKILLs the controller at a kill point (mid-append, mid-attempt, during
policy apply, in the reboot grace, with the outlet off, during boot, during forensics,
between attempts, during the cache push, at the last record, and mid-attempt with the
resume killed mid-attempt as well), resumes with ``--resume``
and holds the result against one uninterrupted run of the same plan on the same fleet:
the same records per host x cell, no attempt recorded twice, no wedge lost, no torn line,
every outlet on and every GPU at its defaults at the end.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator, Mapping

import pytest

from kill9_harness import (Controller, KillPoint, Snapshot, Trigger, broken_invariants, campaign_folder, counts,
                           fleet_problems, reset_host, wait_and_kill)
from test_fleet_campaign import write_playbook

# Only scripted outcomes: the first host wedges on its 2nd attempt (the lgc cell's first),
# the second host never does; everything after the script is clean.
QUIET = dict(p_wedge=0.0, p_error=0.0, p_hang=0.0, p_reboot=0.0, boot_delay_s=0.5, time_scale=0.03)
WEDGING, STEADY = "k9-wedging", "k9-steady"
CELLS = "  - name: default\n  - name: lgc-2800\n    graphics_clocks: [180, 2800]\n"
ATTEMPTS = 2
KILL_DEADLINE_S = 90.0
RESUME_DEADLINE_S = 180.0
CACHE_MB = 24  # random bytes (no compression helps): its push takes a moment over SSH


@dataclass(frozen=True)
class KillFleet:
    """The module's fleet, on one simulated smart plug, and the plans run against it."""

    fleet: Any
    book: Path
    cache_book: Path
    gpu_defaults: Mapping[str, Any]

    @property
    def hosts(self) -> list[Any]:
        return list(self.fleet.hosts)

    def env(self, reports: Path) -> dict[str, str]:
        """Invoke config through the environment (names from tasks.DEFAULTS)."""
        return {"INVOKE_REPROFLEET_REPORTS": str(reports), "INVOKE_REPROFLEET_KNOWN_HOSTS": str(self.fleet.known_hosts_path),
                "INVOKE_REPROFLEET_DWELL_S": "1", "INVOKE_REPROFLEET_STABILITY_S": "1",
                "INVOKE_REPROFLEET_REBOOT_GRACE_S": "1", "INVOKE_REPROFLEET_SAMPLE_HZ": "5",
                "INVOKE_REPROFLEET_CONTROLLER": "kill9", "PYTHONUNBUFFERED": "1"}

    def reset(self) -> None:
        for host in self.hosts:
            reset_host(host, host.paths.hw / "attempts.json")

    def start(self, reports: Path, log: Path, *, cache: bool = False, resume: Path | None = None) -> Controller:
        book = self.cache_book if cache else self.book
        return Controller.start(self.env(reports), Path(self.fleet.inventory_path), book, log, resume=resume)


@pytest.fixture(scope="module")
def kill_fleet(sim_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KillFleet]:
    from reprofleet.sim import Fleet, SimHostSpec
    from reprofleet.sim.rfsim.gpu import SETTINGS_DEFAULTS

    folder = tmp_path_factory.mktemp("kill9")
    book = write_playbook(folder / "book", attempts=ATTEMPTS, attempt_timeout=30, cells=CELLS,
                          extra="order: interleaved\n")
    cache_book = write_playbook(folder / "cache-book", attempts=ATTEMPTS, attempt_timeout=30, cells=CELLS,
                                extra="order: interleaved\n")
    seed = folder / "cache-book" / "cache-seed"
    seed.mkdir()
    for i in range(CACHE_MB // 8):
        (seed / f"blob{i}.bin").write_bytes(os.urandom(8 << 20))
    text = cache_book.read_text().replace("poc: {script: poc/", "poc: {cache: persistent, cache_source: cache-seed, script: poc/")
    cache_book.write_text(text)
    fleet = Fleet.up((SimHostSpec(WEDGING, script=("clean", "wedge"), **QUIET), SimHostSpec(STEADY, **QUIET)))
    try:
        fleet.attach_plug("tasmota")
        yield KillFleet(fleet, book, cache_book, dict(SETTINGS_DEFAULTS))
    finally:
        fleet.down(remove_files=True)


@dataclass(frozen=True)
class Reference:
    """The uninterrupted run: what every resumed campaign must match."""

    counts: Mapping[tuple[str, str], int]
    wedges: int
    seconds: float


@pytest.fixture(scope="module")
def reference(kill_fleet: KillFleet, tmp_path_factory: pytest.TempPathFactory) -> Reference:
    folder = tmp_path_factory.mktemp("reference")
    kill_fleet.reset()
    started = time.monotonic()
    controller = kill_fleet.start(folder / "reports", folder / "controller.log")
    rc = controller.wait(RESUME_DEADLINE_S)
    seconds = time.monotonic() - started
    assert rc == 0, controller.tail()
    after = Snapshot.read(campaign_folder(folder / "reports"))
    problems = broken_invariants(after, counts(after.records)) + fleet_problems(kill_fleet.hosts,
                                                                                kill_fleet.gpu_defaults)
    assert not problems, problems
    return Reference(counts(after.records), len(after.events_of("wedge")), seconds)


@pytest.mark.fleet
def test_the_uninterrupted_run_does_every_slot_once_and_wedges_where_the_kill_points_need_it(
        reference: Reference) -> None:
    assert reference.counts == {(host, cell): ATTEMPTS for host in (WEDGING, STEADY)
                                for cell in ("default", "lgc-2800")}
    assert reference.wedges == 1
    print(f"uninterrupted run: {reference.seconds:.1f} s")


# -- the kill points ------------------------------------------------------------------------
def _stream_growing(now: Snapshot, before: Snapshot | None) -> bool:
    recorded = {str(r.get("attempt")) for r in now.record_lines}
    return before is not None and any(
        size > 2000 and size > before.streams.get(attempt, 0) > 0 and attempt not in recorded
        for attempt, size in now.streams.items())


def _in_grace(now: Snapshot, _: Snapshot | None) -> bool:
    hosts_off = {e.get("host") for e in now.recovery_to("off")} | {e.get("host") for e in now.recovery_to("booting")}
    return any(e.get("host") not in hosts_off for e in now.events_of("wedge"))


def _pushing_cache(now: Snapshot, _: Snapshot | None) -> bool:
    """Replaced per run by :func:`cache_upload_growing` (it needs the hosts' files)."""
    return False


def cache_upload_growing(hosts: list[Any], since: float) -> Trigger:
    """The starting cache's upload is on a host's disk, written since ``since``, and that host
    has no ``prepared`` event yet: the controller is inside the push (SFTP writes it in place)."""
    def trigger(now: Snapshot, _: Snapshot | None) -> bool:
        prepared = {e.get("host") for e in now.events_of("prepared")}
        for host in hosts:
            if host.name in prepared:
                continue
            for upload in (host.paths.fs("root") / ".cache" / "reprofleet" / "cache-seed").glob("*.tar.gz"):
                try:
                    if upload.stat().st_mtime >= since and upload.stat().st_size > 0:
                        return True
                except FileNotFoundError:
                    continue
        return False

    return trigger


TOTAL_SLOTS = 2 * 2 * ATTEMPTS
KILL_POINTS = [
    KillPoint("mid-append", lambda now, _: len(now.record_lines) >= 1, torn_tail=True),
    KillPoint("mid-attempt", _stream_growing),
    KillPoint("policy-apply", lambda now, _: bool(now.events_of("policy_applied"))),
    KillPoint("reboot-grace", _in_grace),
    KillPoint("outlet-off", lambda now, _: bool(now.recovery_to("off"))),
    KillPoint("booting", lambda now, _: bool(now.recovery_to("booting"))),
    KillPoint("forensics", lambda now, _: bool(now.recovery_to("forensics"))),
    KillPoint("between-attempts", lambda now, _: len(now.record_lines) >= 3),
    KillPoint("cache-push", _pushing_cache, cache_push=True),
    # the last host's GPU restore follows its last record within ~0.1 s: look often
    KillPoint("last-record", lambda now, _: len(now.record_lines) >= TOTAL_SLOTS, poll_s=0.002),
    KillPoint("resume-killed-too", _stream_growing),
    # one host has done all its slots (its GPU still holds the last cell's policy), the other has not
    KillPoint("first-host-done", lambda now, _: max(Counter(str(r.get("host")) for r in now.record_lines).values(),
                                                    default=0) >= TOTAL_SLOTS // 2, poll_s=0.002),
]
AGAIN = {  # kill points whose resume is killed as well, when this says so (given the folder at the first kill)
    "resume-killed-too": lambda first: lambda now, before: (
        _stream_growing(now, before) and bool(set(now.streams) - set(first.streams))),
}


@pytest.mark.fleet
@pytest.mark.parametrize("point", KILL_POINTS, ids=[p.name for p in KILL_POINTS])
def test_a_campaign_killed_and_resumed_ends_as_an_uninterrupted_one(
        point: KillPoint, kill_fleet: KillFleet, reference: Reference, tmp_path: Path) -> None:
    kill_fleet.reset()
    reports = tmp_path / "reports"
    if point.cache_push:
        point = replace(point, trigger=cache_upload_growing(kill_fleet.hosts, time.time()))
    controller = kill_fleet.start(reports, tmp_path / "killed.log", cache=point.cache_push)
    at_kill = wait_and_kill(controller, reports, point, KILL_DEADLINE_S)
    print(f"{point.name}: killed after {time.monotonic() - controller.started:.1f} s with "
          f"{len(at_kill.record_lines)} records, {len(at_kill.events.entries)} events")
    again = AGAIN.get(point.name)
    if again is not None:  # a new attempt of the resume streams: kill the resume too
        resumed = kill_fleet.start(reports, tmp_path / "resumed-killed.log", cache=point.cache_push,
                                   resume=at_kill.root)
        wait_and_kill(resumed, reports, KillPoint(f"{point.name} (the resume)", again(at_kill)), KILL_DEADLINE_S)
    resumed = kill_fleet.start(reports, tmp_path / "resumed.log", cache=point.cache_push, resume=at_kill.root)
    rc = resumed.wait(RESUME_DEADLINE_S)
    after = Snapshot.read(at_kill.root)
    problems = ([f"the resume exited {rc}: {resumed.tail(5)}"] if rc != 0 else [])
    problems += broken_invariants(after, reference.counts) + fleet_problems(kill_fleet.hosts, kill_fleet.gpu_defaults)
    if problems:
        problems.append(f"(the campaign folder and both controllers' logs: {tmp_path})")
    assert not problems, f"{point.name}:\n  " + "\n  ".join(problems)


# -- the checks themselves can fail (no fleet) ------------------------------------------------
def _folder(tmp_path: Path, attempts: list[Any], events: list[Any]) -> Snapshot:
    def lines(entries: list[Any]) -> str:
        return "".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in entries)

    (tmp_path / "attempts.jsonl").write_text(lines(attempts))
    (tmp_path / "events.jsonl").write_text(lines(events))
    return Snapshot.read(tmp_path)


def _record(attempt: str, cell: str, outcome: str = "clean", reason: str | None = None) -> dict[str, Any]:
    return {"schema": 1, "attempt": attempt, "host": "h", "cell": cell, "outcome": outcome, "reason": reason}


WANT = {("h", "a"): 1, ("h", "b"): 1}


def test_a_folder_like_the_uninterrupted_run_breaks_nothing(tmp_path: Path) -> None:
    folder = _folder(tmp_path, [_record("1", "a", "infra", "interrupted: SIGKILL"), _record("2", "a", "wedge"),
                                _record("3", "b"), {"schema": 1, "amends": "2", "forensics": {}}],
                     [{"event": "wedge", "host": "h", "attempt": "2"}])
    assert broken_invariants(folder, WANT) == []


def test_a_wedge_event_without_its_wedge_record_is_a_lost_wedge(tmp_path: Path) -> None:
    folder = _folder(tmp_path, [_record("1", "a"), _record("3", "b")], [{"event": "wedge", "host": "h", "attempt": "9"}])
    (problem,) = broken_invariants(folder, WANT)
    assert problem.startswith("lost wedge: events.jsonl entry 1")


def test_a_slot_recorded_twice_a_missing_slot_and_a_torn_line_are_each_named(tmp_path: Path) -> None:
    folder = _folder(tmp_path, [_record("1", "a"), _record("1", "a"), '{"schema": 1, "attem'], [])
    problems = broken_invariants(folder, WANT)
    assert any("records per (host, cell)" in p and "('h', 'b'): (0, 1)" in p for p in problems), problems
    assert any(p == "attempt ids recorded more than once: ['1']" for p in problems), problems
    assert any(p.startswith("torn line attempts.jsonl:3") for p in problems), problems
