"""An overnight campaign survives ``kill -9`` of its controller, wherever it lands.

The controller runs as ``invoke campaign`` in its own process; the test watches the
campaign folder, SIGKILLs the controller at a kill point (mid-append, mid-attempt, during
policy apply, in the reboot grace, with the outlet off, during boot, during forensics,
between attempts, during the cache push, at the last record), resumes with ``--resume``
and holds the result against one uninterrupted run of the same plan on the same fleet:
the same records per host x cell, no attempt recorded twice, no wedge lost, no torn line,
every outlet on and every GPU at its defaults at the end.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import pytest

from kill9_harness import (Controller, KillPoint, Snapshot, broken_invariants, campaign_folder, counts,
                           fleet_problems, reset_host, wait_and_kill)
from test_fleet_campaign import write_playbook

pytestmark = pytest.mark.fleet

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
    prepared = {e.get("host") for e in now.events_of("prepared")}
    return bool(now.facts - prepared)


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
    KillPoint("last-record", lambda now, _: len(now.record_lines) >= TOTAL_SLOTS),
]


@pytest.mark.parametrize("point", KILL_POINTS, ids=[p.name for p in KILL_POINTS])
def test_a_campaign_killed_and_resumed_ends_as_an_uninterrupted_one(
        point: KillPoint, kill_fleet: KillFleet, reference: Reference, tmp_path: Path) -> None:
    kill_fleet.reset()
    reports = tmp_path / "reports"
    controller = kill_fleet.start(reports, tmp_path / "killed.log", cache=point.cache_push)
    at_kill = wait_and_kill(controller, reports, point, KILL_DEADLINE_S)
    print(f"{point.name}: killed after {time.monotonic() - controller.started:.1f} s with "
          f"{len(at_kill.record_lines)} records, {len(at_kill.events.entries)} events")
    resumed = kill_fleet.start(reports, tmp_path / "resumed.log", cache=point.cache_push, resume=at_kill.root)
    rc = resumed.wait(RESUME_DEADLINE_S)
    after = Snapshot.read(at_kill.root)
    problems = ([f"the resume exited {rc}: {resumed.tail(5)}"] if rc != 0 else [])
    problems += broken_invariants(after, reference.counts) + fleet_problems(kill_fleet.hosts, kill_fleet.gpu_defaults)
    if problems:
        problems.append(f"(the campaign folder and both controllers' logs: {tmp_path})")
    assert not problems, f"{point.name}:\n  " + "\n  ".join(problems)
