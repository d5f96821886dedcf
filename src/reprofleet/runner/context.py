"""What every host runner of one campaign shares: its settings, its files, its PoC, and
the identity each cell's records carry."""

from __future__ import annotations

import hashlib
import secrets
import threading
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, AbstractSet, Any, Callable, Iterable, Mapping

from reprofleet.clock import Clock, SystemClock
from reprofleet.config import DEFAULT_TIMINGS, Timings
from reprofleet.credentials import Secret
from reprofleet.records import identity
from reprofleet.runner import poc
from reprofleet.runner.cache_sync import Snapshot
from reprofleet.remote.agent import AgentBundle
from reprofleet.model import CampaignEvent, Cell, Playbook
from reprofleet.remote.netconsole import NetconsoleReceiver
from reprofleet.records.disk_caps import CampaignDiskBudget, DiskCaps
from reprofleet.records.store import AttemptLog, CampaignDir, JsonlAppender, iso_utc
from reprofleet.remote.transport import TransportSettings
from reprofleet.liveness.watchdog import FleetLiveness, WatchdogSettings
from reprofleet.power.control import PowerControl

if TYPE_CHECKING:
    from reprofleet.runner.slurm_node import SlurmNodes


@dataclass(frozen=True)
class RunSettings:
    """Controller-side knobs of a campaign run.

    ``timings`` holds every wait of the runner, recovery and the attempt follower; the fields
    a user sets in invoke.yaml (dwell, stability, reboot grace, the watchdog's windows) are
    kept here as they were and default to the same values (see ``reprofleet.config``).
    """

    transport: TransportSettings
    watchdog: WatchdogSettings = WatchdogSettings()
    controller: str = "controller"
    sample_hz: float = 10.0
    clock_threshold_mhz: float = 2800.0
    power_cycle_budget: int = 20
    infra_streak: int = 3  # this many infra attempts in a row for one reason quarantine the host with it
    disk_floor_mb: float = 512.0  # no attempt starts while the campaign folder's disk has less free than this
    disk: DiskCaps = DiskCaps()  # what streams and netconsole files may take of it (records/disk_caps.py)
    dwell_s: float = DEFAULT_TIMINGS.dwell_s
    stability_s: float = DEFAULT_TIMINGS.stability_s
    reboot_grace_s: float = DEFAULT_TIMINGS.reboot_grace_s
    break_leases: bool = False  # take hosts another campaign holds (only when a person says so)
    own_leases_ended: bool = False  # a requeued Slurm shard: leases under this controller's own name are its ended run's
    bring_up: bool = False  # cycle a host at the start even if this campaign never saw it answer
    timings: Timings = DEFAULT_TIMINGS

    def with_timings(self, timings: Timings) -> "RunSettings":
        """These settings with every wait taken from ``timings`` (a test's ``Timings().scaled(f)``)."""
        return replace(self, timings=timings, watchdog=WatchdogSettings.from_timings(timings, self.watchdog.dead_rounds),
                       dwell_s=timings.dwell_s, stability_s=timings.stability_s,
                       reboot_grace_s=timings.reboot_grace_s)


class CampaignLedger:
    """What host threads of one campaign change, behind one lock: the attempts recorded so
    far, the power cuts a neighbour's cycle caused, and why the whole campaign had to stop."""

    def __init__(self, recorded: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._recorded: set[str] = set(recorded)
        self._cuts: dict[str, list[tuple[float, str]]] = {}
        self._failure: str | None = None

    def record(self, attempt_id: str) -> None:
        with self._lock:
            self._recorded.add(attempt_id)

    def recorded(self, attempt_id: str) -> bool:
        with self._lock:
            return attempt_id in self._recorded

    @property
    def recorded_count(self) -> int:
        with self._lock:
            return len(self._recorded)

    def note_cut(self, host: str, when: float, why: str) -> None:
        with self._lock:
            self._cuts.setdefault(host, []).append((when, why))

    def cut_since(self, host: str, since: float) -> str | None:
        with self._lock:
            cuts = [why for when, why in self._cuts.get(host, ()) if when >= since]
        return cuts[-1] if cuts else None

    def fail(self, reason: str) -> bool:
        """Keep the first reason; True when this call set it."""
        with self._lock:
            if self._failure is not None:
                return False
            self._failure = reason
            return True

    @property
    def failure(self) -> str | None:
        with self._lock:
            return self._failure


@dataclass
class CampaignContext:
    """What every host runner of one campaign shares, complete when it is constructed.

    Nothing in the controller assigns a field after construction (tests/unit checks it); the
    collections host threads read are given whole (a resume's history, the outlets that feed
    each host), and what they change is the :class:`CampaignLedger`, behind its lock.
    """

    campaign_id: str
    directory: CampaignDir
    playbook: Playbook
    settings: RunSettings
    bundle: AgentBundle
    poc_script: bytes
    attempt_log: AttemptLog
    events: JsonlAppender
    fleet: FleetLiveness
    stop: threading.Event
    progress: Callable[..., None] = lambda host, **fields: None
    power: PowerControl | None = None  # the power log and device locks, when the campaign may switch power
    cache_seed: tuple[bytes, str] | None = None  # the starting cache, packed once for every host
    cache_snapshot: Snapshot | None = None  # of cache_source, hashed once when a cell is seeded
    started_slots: Mapping[str, tuple[Cell, int]] = field(default_factory=dict)  # attempt id -> its slot
    started_on: Mapping[str, str] = field(default_factory=dict)  # attempt id -> the host it started on
    seen_alive: AbstractSet[str] = field(default_factory=set)  # hosts this campaign prepared or recorded before
    ledger: CampaignLedger = field(default_factory=CampaignLedger)  # what host threads change, behind a lock
    netconsole: NetconsoleReceiver | None = None  # when any host has netconsole:
    disk_budget: CampaignDiskBudget | None = None  # the campaign's cap on streams and netconsole, shared
    clock: Clock = field(default_factory=SystemClock)  # every wait of the runners; virtual in seam tests
    lease_token: str = field(default_factory=lambda: secrets.token_hex(16))  # this controller run's, fences it
    host_outlets: Mapping[str, frozenset[str]] = field(default_factory=dict)  # host -> the outlet keys that feed it
    env_secrets: Mapping[str, Secret] = field(default_factory=dict)  # name -> value, for the PoC's environment only
    secret_digests: Mapping[str, str] = field(default_factory=dict)  # name -> hash, when they join cell identities
    slurm: SlurmNodes | None = None  # the lab's scheduler, when hosts are Slurm nodes (runner/slurm_node.py)

    def note_cut(self, host: str, why: str) -> None:
        """``host`` shares an outlet with a host about to be cycled: its attempt will end by the cut."""
        self.ledger.note_cut(host, self.clock.monotonic(), why)

    def cut_since(self, host: str, since: float) -> str | None:
        """Why ``host`` lost power through a neighbour's cycle at or after ``since`` (monotonic), if it did."""
        return self.ledger.cut_since(host, since)

    @property
    def failure(self) -> str | None:
        """Why the whole campaign had to stop (the controller's disk is full ...), if it did."""
        return self.ledger.failure

    @property
    def lease_ttl_s(self) -> float:
        """How long a host's lease holds without renewal: longer than the longest gap between
        two attempts of a live controller (an attempt to its deadline, then a recovery to a
        boot), so only a controller that is gone lets it lapse."""
        timeouts, timings = self.playbook.timeouts, self.settings.timings
        return timeouts.attempt + timings.controller_grace_s + self.settings.reboot_grace_s \
            + 2 * (self.settings.dwell_s + timeouts.boot) + 600.0

    def recorded(self, attempt_id: str) -> bool:
        return self.ledger.recorded(attempt_id)

    def event(self, host: str, what: CampaignEvent, **fields: Any) -> None:
        """Append one event; a controller that cannot write any more stops the campaign
        (the caller goes on to its next step, which sees the stop)."""
        try:
            self.events.append({"t": iso_utc(self.clock.wall()), "host": host, "event": CampaignEvent(what).value, **fields})
        except OSError as exc:
            self.fail(f"cannot write {self.events.path}: {exc}")

    def fail(self, reason: str) -> None:
        """Stop the whole campaign for a reason that is the controller's, not a host's."""
        self.ledger.fail(reason)
        self.stop.set()

    @cached_property
    def poc_digest(self) -> str:
        """sha256 of the PoC bytes this campaign pushes: records and cell identities carry it."""
        return hashlib.sha256(self.poc_script).hexdigest()


def record_runtime(cell: Cell) -> dict[str, Any]:
    """The runtime a record stores, and that its cell identity is computed from."""
    return {"kind": cell.runtime.kind.value, "label": cell.runtime.label, "cache_key": poc.cache_key(cell)}


def identity_factors(cell: Cell, secret_digests: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The factors a cell's identity is hashed from: its own, plus the hashes of its env_secrets
    when the playbook says ``env_secrets_identity`` (never the values, and never in the record's factors)."""
    return {**cell.factors, "env_secrets": dict(sorted(secret_digests.items()))} if secret_digests else dict(cell.factors)


def cell_identity(cell: Cell, poc_digest: str, secret_digests: Mapping[str, str] | None = None) -> str:
    """The identity records and the manifest give ``cell`` (name, factors, runtime, PoC)."""
    return identity.cell_id(cell.name, identity_factors(cell, secret_digests), record_runtime(cell), poc_digest)
