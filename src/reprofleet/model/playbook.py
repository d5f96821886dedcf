"""A validated campaign definition: PoC, timeouts, cells, judging."""

from __future__ import annotations

from dataclasses import dataclass, field

from reprofleet.model.cells import Cell
from reprofleet.model.hosts import CredentialRef
from reprofleet.model.judging import (DEFAULT_FIXED_RATIO, DEFAULT_MAX_EXCLUDED_SHARE, DEFAULT_REPRODUCTIONS,
                                      EarlyReproductions, Judging, StopRule)
from reprofleet.model.outcomes import Outcome, Phase
from reprofleet.model.search import BisectBlock, SearchBlock


@dataclass(frozen=True)
class EnvSecret:
    """One variable of the PoC's environment whose value is a secret (``env_secrets: {HF_TOKEN: env:HF_TOKEN}``).

    Only the name and where the value lives cross module lines; the value is read at the
    campaign's start and goes to the agent on stdin, never into factors, records or argv.
    """

    name: str
    ref: CredentialRef


@dataclass(frozen=True)
class Timeouts:
    """Deadlines of a campaign, in seconds."""

    attempt: float = 900.0
    boot: float = 600.0
    connect: float = 10.0
    nmi_reboot: float = 300.0  # after a recovery NMI: a kdump's capture boot, its write and the reboot
    slurm_jobs: float = 3600.0  # a Slurm node's running jobs, waited for before its attempts (then it is refused)


@dataclass(frozen=True)
class Poc:
    """The reproducer: a script pushed to every host, and how to keep its cache."""

    script: str  # absolute path on the controller
    cache: str = "persistent"  # one of CACHE_MODES
    cache_source: str | None = None  # controller dir: the starting cache (persistent) or the snapshot (seeded)

    def mode(self, cell: "Cell") -> str:
        """The cache mode ``cell`` runs under: its own, else the playbook's."""
        return cell.cache or self.cache


# persistent: one cache per host and runtime, carried over; fresh: an empty one per attempt;
# seeded: cache_source's snapshot, rebuilt before every attempt (every host starts identical)
CACHE_MODES = ("persistent", "fresh", "seeded")


@dataclass(frozen=True)
class Playbook:
    """A validated campaign definition."""

    name: str
    path: str
    poc: Poc
    attempts: int
    timeouts: Timeouts
    cells: tuple[Cell, ...]
    order: str = "blocks"  # "blocks" | "interleaved" | "sequential" | "shuffled"
    reproductions: tuple[Outcome, ...] = DEFAULT_REPRODUCTIONS
    description: str = ""
    seed: int | None = None
    reference: str | None = None  # the cell every other is compared with; None: the first cell
    at_risk_phase: Phase | None = None
    max_excluded_share: float = DEFAULT_MAX_EXCLUDED_SHARE
    stop: StopRule = StopRule()  # campaign-wide; a cell's own ``stop`` wins
    fixed_ratio: float = DEFAULT_FIXED_RATIO  # "fixed" needs the rate ratio's upper bound below it
    early_reproductions: EarlyReproductions = EarlyReproductions.COUNT
    env_secrets: tuple[EnvSecret, ...] = ()  # in the PoC's environment only, never in a factor
    env_secrets_identity: bool = False  # a hash of each value joins the cells' identity (a new token: new cells)
    hosts: str | None = None  # an Ansible host pattern: which of the inventory's hosts this campaign is for
    hosts_line: int | None = None  # the line of that pattern in the playbook (for its one-line error)
    search: SearchBlock | None = None  # the cells are a search's levels, chosen at run time (model/search.py)
    bisect: BisectBlock | None = None  # the cells are a bisection's versions, chosen at run time
    after_budget: str = "cycle"  # a host frozen once the power-cycle budget is spent: "cycle" (one last, booted and
    # restored) or "off" (left switched off, on purpose)
    # the YAML as it was read: campaign.json keeps a copy, and a resume runs that copy (campaign/resume.py)
    text: str = field(default="", repr=False, compare=False)

    @property
    def ladder(self) -> SearchBlock | BisectBlock | None:
        """The search or bisection whose ladder picks each host's next cell; None: a fixed plan."""
        return self.search or self.bisect

    @property
    def judging(self) -> Judging:
        return Judging(self.reproductions, self.at_risk_phase, self.max_excluded_share, self.fixed_ratio,
                       self.early_reproductions)

    @property
    def reference_cell(self) -> Cell:
        return next((c for c in self.cells if c.name == self.reference), self.cells[0])

    def stop_rule(self, cell: Cell) -> StopRule:
        """The rule a cell runs under; the reference never stops early."""
        if cell.name == self.reference_cell.name:
            return StopRule()
        return cell.stop or self.stop
