"""An overnight campaign survives ``kill -9`` of its controller, wherever it lands.

The controller runs as ``invoke campaign`` in its own process; the test watches the
campaign folder and SIGKILLs the controller at a kill point (mid-append, mid-attempt, during
policy apply, in the reboot grace, with the outlet off, during boot, during forensics,
between attempts, during the cache push, at the last record, with one host done,
mid-attempt with the resume killed mid-attempt as well, mid-attempt with the attempt left
to finish before the resume, and mid-attempt with its host frozen before the resume). The points are chained: one
campaign is killed at the first, its ``--resume`` at the next, and so on (two chains: the
campaign's course, a wedge's recovery), so two campaigns cover what took one per point;
the cache push keeps a campaign of its own. Each chain's last resume runs to the end and
is held against one uninterrupted run of the same plan on the same fleet:
the same records per host x cell, no attempt recorded twice, every attempt started
recorded, no wedge lost, no torn line, every outlet on, every GPU at its defaults and no
attempt's container left on any host at the end (every attempt here is a docker one, and a
container outlives its killed client).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import pytest

from tests.support.kill9_harness import (POLL_S, Controller, KillPoint, Snapshot, Trigger, broken_invariants, campaign_folder, counts,
                           fleet_problems, reset_host, wait_and_kill)
from tests.support.fleet_campaign import write_playbook

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
                "INVOKE_REPROFLEET_CORRELATED_HOLD_S": "3",  # its two hosts wedge in one round: not held 300 s
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
    # the wedging host has an armed watchdog: its facts keep the reboot grace the "reboot-grace" link kills in
    fleet = Fleet.up((SimHostSpec(WEDGING, script=("clean", "wedge"), hardware_watchdog=True, **QUIET),
                      SimHostSpec(STEADY, **QUIET)))
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
# A kill point of its own campaign (a fresh one, killed, then resumed): the cache push, which
# needs a playbook of its own.
KILL_POINTS = [KillPoint("cache-push", _pushing_cache, cache_push=True)]


# Kill points of one chain: one campaign killed at the first, its resume killed at the next,
# and so on; each moment is one that came after the link started (``base``: the folder then),
# so a resume is killed by what it did itself, not by what its folder already held.
def _new_stream_growing(base: Snapshot) -> Trigger:
    return lambda now, before: _stream_growing(now, before) and bool(set(now.streams) - set(base.streams))


def _new_record(base: Snapshot, at_least: int = 1) -> Trigger:
    return lambda now, _: len(now.record_lines) > len(base.record_lines) and len(now.record_lines) >= at_least


def _new_policy_applied(base: Snapshot) -> Trigger:
    return lambda now, _: len(now.events_of("policy_applied")) > len(base.events_of("policy_applied"))


def _host_done(base: Snapshot) -> Trigger:
    """One host has done all its slots in this link (its GPU still holds the last cell's policy), the other not."""
    def per_host(snap: Snapshot) -> list[int]:
        tally = Counter(str(r.get("host")) for r in snap.record_lines)
        return [tally.get(WEDGING, 0), tally.get(STEADY, 0)]

    return lambda now, _: (max(per_host(base)) < TOTAL_SLOTS // 2 <= max(per_host(now))
                           and min(per_host(now)) < TOTAL_SLOTS // 2)


def _new_wedge_in_grace(base: Snapshot) -> Trigger:
    """A wedge of this link whose host has no ``off``/``booting`` step yet: the reboot grace."""
    def trigger(now: Snapshot, _: Snapshot | None) -> bool:
        fresh = now.events.entries[len(base.events.entries):]
        wedged = {e.get("host") for e in fresh if e.get("event") == "wedge"}
        stepped = {e.get("host") for e in fresh if e.get("event") == "recovery" and e.get("to") in ("off", "booting")}
        return bool(wedged - stepped)

    return trigger


def _new_recovery_to(state: str) -> Callable[[Snapshot], Trigger]:
    return lambda base: lambda now, _: len(now.recovery_to(state)) > len(base.recovery_to(state))


@dataclass(frozen=True)
class ChainLink:
    name: str
    trigger: Callable[[Snapshot], Trigger]  # the moment, given the folder when the link started
    torn_tail: bool = False
    poll_s: float = POLL_S
    wedge: bool = False  # the moment needs a wedge: freeze the wedging host mid-attempt if none is under way
    while_dead: str | None = None  # what happens before the resume: "finishes" (the attempt ends) or "freezes"


def _unrecorded_attempts(snap: Snapshot) -> dict[str, str]:
    """Attempt id -> host of every attempt the folder says started and has no record."""
    recorded = {str(r.get("attempt")) for r in snap.record_lines}
    return {str(e.get("attempt")): str(e.get("host")) for e in snap.events_of("attempt_started")
            if str(e.get("attempt")) not in recorded}


def _while_dead(kill_fleet: "KillFleet", link: ChainLink, at_kill: Snapshot) -> None:
    """Between the kill and the resume: let the running attempt end on its host, or freeze that host."""
    if link.while_dead is None:
        return
    running = _unrecorded_attempts(at_kill)
    assert running, f"{link.name}: no attempt was running at the kill"
    attempt, host_name = next(iter(running.items()))
    host = next(h for h in kill_fleet.hosts if h.name == host_name)
    if link.while_dead == "freezes":
        host.freeze()
        return
    exit_file = host.paths.fs("root") / ".cache" / "reprofleet" / "attempts" / attempt / "exit.json"
    deadline = time.monotonic() + KILL_DEADLINE_S
    while not exit_file.exists():  # the evidence: the host's own exit file, written with nobody watching
        assert time.monotonic() < deadline, f"{link.name}: {attempt} never ended on {host_name}"
        time.sleep(POLL_S)


# The campaign's course: its start, attempts, records, one host done, the last record.
PROGRESS_CHAIN = [
    ChainLink("policy-apply", _new_policy_applied),
    ChainLink("mid-attempt", _new_stream_growing),
    # the resume of a kill mid-attempt, killed mid-attempt itself (a new attempt streams)
    ChainLink("resume-killed-too", _new_stream_growing),
    ChainLink("mid-append", _new_record, torn_tail=True),
    ChainLink("first-host-done", _host_done, poll_s=0.002),
    ChainLink("between-attempts", lambda base: _new_record(base, 3)),
    # an attempt that runs to its end while no controller watches: recorded from the host's files
    ChainLink("finished-while-dead", _new_stream_growing, while_dead="finishes"),
    # the last host's GPU restore follows its last record within ~0.1 s: look often
    ChainLink("last-record", lambda base: _new_record(base, TOTAL_SLOTS), poll_s=0.002),
]
# A wedge's recovery, step by step: the scripted wedge killed in its grace, a host frozen
# while the controller is dead, the resume's own recovery of a frozen host killed with the
# outlet off; then wedges the test makes (the
# wedging host frozen mid-attempt) killed while booting and during forensics.
RECOVERY_CHAIN = [
    ChainLink("reboot-grace", _new_wedge_in_grace),
    # a host that freezes under its attempt while no controller watches: a wedge on that very
    # attempt at resume, whose recovery the next link kills with the outlet off
    ChainLink("froze-while-dead", _new_stream_growing, while_dead="freezes"),
    ChainLink("outlet-off", _new_recovery_to("off")),
    ChainLink("booting", _new_recovery_to("booting"), wedge=True),
    ChainLink("forensics", _new_recovery_to("forensics"), wedge=True),
]


def _freezer(host: Any, base: Snapshot) -> Callable[[Snapshot], None]:
    """Freeze ``host`` once, as soon as an attempt of this link streams on it (a wedge mid-attempt),
    unless the link already saw it wedge or go off."""
    done: list[bool] = []

    def on_poll(now: Snapshot) -> None:
        if done:
            return
        fresh = now.events.entries[len(base.events.entries):]
        if any(e.get("host") == host.name and e.get("event") in ("wedge", "recovery") for e in fresh):
            done.append(True)  # a recovery of its own is under way
            return
        started = [str(e.get("attempt")) for e in fresh if e.get("event") == "attempt_started"
                   and e.get("host") == host.name]
        if any(now.streams.get(a, 0) > 2000 for a in started) and host.power == "on" and not host.is_frozen:
            host.freeze()
            done.append(True)

    return on_poll


def _check_resumed(kill_fleet: KillFleet, reference: Reference, resumed: Any, root: Path, folder: Path,
                   name: str) -> None:
    rc = resumed.wait(RESUME_DEADLINE_S)
    after = Snapshot.read(root)
    problems = ([f"the resume exited {rc}: {resumed.tail(5)}"] if rc != 0 else [])
    problems += broken_invariants(after, reference.counts) + fleet_problems(kill_fleet.hosts, kill_fleet.gpu_defaults)
    if problems:
        problems.append(f"(the campaign folder and the controllers' logs: {folder})")
    assert not problems, f"{name}:\n  " + "\n  ".join(problems)


def _run_chain(kill_fleet: KillFleet, reference: Reference, tmp_path: Path, chain: list[ChainLink]) -> None:
    kill_fleet.reset()
    reports = tmp_path / "reports"
    wedging = next(h for h in kill_fleet.hosts if h.name == WEDGING)
    controller = kill_fleet.start(reports, tmp_path / "0-started.log")
    root: Path | None = None
    for number, link in enumerate(chain, 1):
        base = Snapshot.read(root if root is not None else tmp_path / "no-folder-yet")
        point = KillPoint(link.name, link.trigger(base), torn_tail=link.torn_tail, poll_s=link.poll_s)
        at_kill = wait_and_kill(controller, reports, point, KILL_DEADLINE_S,
                                on_poll=_freezer(wedging, base) if link.wedge else None)
        root = at_kill.root
        _while_dead(kill_fleet, link, at_kill)
        print(f"{link.name}: killed after {time.monotonic() - controller.started:.1f} s with "
              f"{len(at_kill.record_lines)} records, {len(at_kill.events.entries)} events")
        controller = kill_fleet.start(reports, tmp_path / f"{number}-resumed.log", resume=root)
    assert root is not None
    _check_resumed(kill_fleet, reference, controller, root, tmp_path, " > ".join(link.name for link in chain))


@pytest.mark.fleet
def test_a_campaign_killed_at_each_step_of_its_course_in_turn_ends_as_an_uninterrupted_one(
        kill_fleet: KillFleet, reference: Reference, tmp_path: Path) -> None:
    _run_chain(kill_fleet, reference, tmp_path, PROGRESS_CHAIN)


@pytest.mark.fleet
def test_a_campaign_killed_at_each_step_of_a_wedge_recovery_in_turn_ends_as_an_uninterrupted_one(
        kill_fleet: KillFleet, reference: Reference, tmp_path: Path) -> None:
    _run_chain(kill_fleet, reference, tmp_path, RECOVERY_CHAIN)


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
    resumed = kill_fleet.start(reports, tmp_path / "resumed.log", cache=point.cache_push, resume=at_kill.root)
    _check_resumed(kill_fleet, reference, resumed, at_kill.root, tmp_path, point.name)
