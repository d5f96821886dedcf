"""Values that cross module lines: frozen dataclasses and unique enums.

Nothing here does I/O. Modules exchange these instead of bare dicts so that a reader can
see what a host, a cell or an attempt record *is* in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, unique
from types import MappingProxyType
from typing import Any, Mapping

from reprofleet.model.events import CampaignEvent, event_of
from reprofleet.model.reasons import ReasonCode, reason_code

SCHEMA_VERSION = 1


def frozen_mapping(values: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    """A read-only view of a copy of ``values`` (for dataclass fields)."""
    return MappingProxyType(dict(values or {}))


@unique
class Outcome(str, Enum):
    """How one attempt ended; see DESIGN.md's outcome table."""

    CLEAN = "clean"
    ERROR = "error"
    HANG = "hang"
    WEDGE = "wedge"
    REBOOT = "reboot"
    INFRA = "infra"


@unique
class Phase(str, Enum):
    """The phases of a vLLM engine start, in the order they occur."""

    ENGINE_INIT = "engine_init"
    MODEL_LOAD = "model_load"
    TORCH_COMPILE = "torch_compile"
    KV_CACHE = "kv_cache"
    KERNEL_WARMUP = "kernel_warmup"
    FLASHINFER_AUTOTUNE = "flashinfer_autotune"
    ATTENTION_WARMUP = "attention_warmup"
    CUDA_GRAPH_CAPTURE = "cuda_graph_capture"
    READY = "ready"


PHASE_ORDER: tuple[str, ...] = tuple(p.value for p in Phase)


def phase_reached(last_phase: str | None, phase: "Phase") -> bool:
    """Whether an attempt whose last phase was ``last_phase`` got as far as ``phase``."""
    if last_phase not in PHASE_ORDER:
        return False
    return PHASE_ORDER.index(str(last_phase)) >= PHASE_ORDER.index(phase.value)


@unique
class Role(str, Enum):
    """What one outcome means for a cell's rate."""

    REPRODUCTION = "reproduction"  # in the numerator and the denominator
    NON_REPRODUCTION = "non_reproduction"  # in the denominator only
    EXCLUDED = "excluded"  # in neither, but counted and shown with its reason


DEFAULT_REPRODUCTIONS: tuple["Outcome", ...] = (Outcome.WEDGE, Outcome.REBOOT)
DEFAULT_MAX_EXCLUDED_SHARE = 0.2


@dataclass(frozen=True)
class Judging:
    """How a campaign's outcomes count. Written into the manifest; every report uses it.

    A watchdog reset of a locked host is a ``reboot``, so reboots count by default. An
    ``error`` or ``hang`` says something about the bug only when the attempt reached the
    phase at risk (for the seed: CUDA-graph capture); before it (a broken image, a typo)
    it is excluded, so six errors never read like a fix. Without ``at_risk_phase`` they are
    always excluded. ``infra`` is always excluded.
    """

    reproductions: tuple[Outcome, ...] = DEFAULT_REPRODUCTIONS
    at_risk_phase: Phase | None = None
    max_excluded_share: float = DEFAULT_MAX_EXCLUDED_SHARE  # above it a cell is "cannot judge"

    def role(self, outcome: "Outcome | str", last_phase: str | None = None) -> Role:
        outcome = Outcome(outcome)
        if outcome is Outcome.INFRA:
            return Role.EXCLUDED
        if outcome in self.reproductions:
            return Role.REPRODUCTION
        if outcome is Outcome.CLEAN:
            return Role.NON_REPRODUCTION
        if outcome in (Outcome.ERROR, Outcome.HANG) and self.at_risk_phase is not None \
                and phase_reached(last_phase, self.at_risk_phase):
            return Role.NON_REPRODUCTION
        return Role.EXCLUDED

    def exclusion_reason(self, outcome: "Outcome | str", last_phase: str | None = None) -> str:
        """Why an excluded attempt is not in the rate (for reports); empty when it is in."""
        outcome = Outcome(outcome)
        if self.role(outcome, last_phase) is not Role.EXCLUDED:
            return ""
        if outcome is Outcome.INFRA:
            return "infra: could not be judged"
        if outcome in (Outcome.ERROR, Outcome.HANG):
            if self.at_risk_phase is None:
                return f"{outcome.value}: no at_risk_phase set, so it says nothing about the bug"
            return f"{outcome.value} before {self.at_risk_phase.value} (last phase {last_phase or 'none'})"
        return f"{outcome.value}: not counted as a reproduction by this campaign"

    def to_json(self) -> dict[str, Any]:
        return {"reproductions": [o.value for o in self.reproductions],
                "at_risk_phase": self.at_risk_phase.value if self.at_risk_phase else None,
                "max_excluded_share": self.max_excluded_share}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "Judging":
        """From a manifest; a manifest written before roles existed counted wedges only."""
        if not data:
            return cls(reproductions=(Outcome.WEDGE,))
        phase = data.get("at_risk_phase")
        return cls(reproductions=tuple(Outcome(o) for o in data.get("reproductions") or ("wedge",)),
                   at_risk_phase=Phase(phase) if phase else None,
                   max_excluded_share=float(data.get("max_excluded_share", DEFAULT_MAX_EXCLUDED_SHARE)))


@unique
class StopKind(str, Enum):
    """When a cell may stop before its planned attempts (a playbook's ``stop:``)."""

    FIXED_N = "fixed_n"  # run every planned attempt (the default)
    FIRST_REPRODUCTION = "first_reproduction"  # stop at the first reproduction, or once clean runs rule out the reference
    SPRT = "sprt"  # Wald's sequential probability ratio test, capped at 3x the fixed-n design


@dataclass(frozen=True)
class StopRule:
    """A stopping rule. For SPRT, H0 is "the bug is there" (rate ``p0``) and H1 is "fixed"
    (rate ``p1`` < ``p0``): ``alpha`` bounds a false "fixed", ``beta`` a false "still reproduces"."""

    kind: StopKind = StopKind.FIXED_N
    p0: float | None = None
    p1: float | None = None
    alpha: float = 0.05
    beta: float = 0.2
    confidence: float = 0.95  # first_reproduction: the level at which clean runs rule out the reference

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value}
        if self.kind is StopKind.SPRT:
            out.update(p0=self.p0, p1=self.p1, alpha=self.alpha, beta=self.beta)
        elif self.kind is StopKind.FIRST_REPRODUCTION:
            out.update(confidence=self.confidence)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "StopRule":
        if not data:
            return cls()
        return cls(kind=StopKind(data.get("kind", "fixed_n")), p0=data.get("p0"), p1=data.get("p1"),
                   alpha=float(data.get("alpha", 0.05)), beta=float(data.get("beta", 0.2)),
                   confidence=float(data.get("confidence", 0.95)))


@unique
class EventKind(str, Enum):
    """The ``k`` field of one JSON line on an attempt stream (collectors/PROTOCOL.md)."""

    HEARTBEAT = "hb"
    START = "start"
    LOG = "log"
    PHASE = "phase"
    NVML = "nvml"
    KMSG = "kmsg"
    NOTICE = "notice"
    EXIT = "exit"


@dataclass(frozen=True)
class CredentialRef:
    """Where a secret lives, never the secret: ``env:VAR`` or ``file:/path``."""

    source: str  # "env" or "file"
    name: str  # variable name or file path
    where: str = field(default="", compare=False, hash=False)  # inventory file:line:field that names it

    def __str__(self) -> str:
        return f"{self.source}:{self.name}"


@dataclass(frozen=True)
class PowerPort:
    """One way to switch a host's power: a PDU outlet or a BMC."""

    driver: str
    address: str
    outlet: str | None = None
    credentials: CredentialRef | None = None
    options: Mapping[str, Any] = field(default_factory=frozen_mapping, compare=False, hash=False)
    shared: bool = False  # the inventory says another host is fed by this outlet too, on purpose
    where: str = field(default="", compare=False, hash=False)  # inventory file:line of its pdu: block


@dataclass(frozen=True)
class NetconsoleSetting:
    """The inventory's ``netconsole:``: the kernel sends its messages over UDP to the controller.

    ``dev`` and ``target`` default (None) to what the host itself finds: the interface that
    routes to the controller, and the controller's address as the host's SSH session sees it.
    """

    port: int = 6666
    dev: str | None = None
    target: str | None = None
    extended: bool = True  # the kernel's extended header (level, seq, usec): order survives loss
    where: str = field(default="", compare=False, hash=False)  # inventory file:line of the block


@dataclass(frozen=True)
class Host:
    """A machine under test, as the inventory describes it."""

    name: str
    address: str
    port: int = 22
    user: str | None = None
    key_file: str | None = None
    python: str = "python3"
    gpu_index: int = 0
    pdu: PowerPort | None = None
    groups: tuple[str, ...] = ()
    vars: Mapping[str, Any] = field(default_factory=frozen_mapping, compare=False, hash=False)
    more_pdus: tuple[PowerPort, ...] = ()  # further outlets (a second power supply), from ``outlets:``
    netconsole: NetconsoleSetting | None = None  # kernel messages over UDP to the controller

    @property
    def power_ports(self) -> tuple[PowerPort, ...]:
        """Every outlet that feeds this host: all are switched off before any is switched on."""
        return ((self.pdu,) if self.pdu is not None else ()) + self.more_pdus


@dataclass(frozen=True)
class GpuPolicy:
    """GPU settings a cell asks for; ``None`` means "leave at the card's default"."""

    graphics_clocks: tuple[int, int] | None = None  # nvidia-smi -lgc MIN,MAX (MHz)
    memory_clocks: tuple[int, int] | None = None  # nvidia-smi -lmc MIN,MAX (MHz)
    power_limit_w: float | None = None  # nvidia-smi -pl W
    persistence: bool | None = None  # nvidia-smi -pm 1|0
    application_clocks: tuple[int, int] | None = None  # nvidia-smi -ac MEM,GRAPHICS (MHz)

    @property
    def is_default(self) -> bool:
        return all(getattr(self, name) is None for name in self.__dataclass_fields__)

    def as_dict(self) -> dict[str, Any]:
        return {
            name: (list(value) if isinstance(value, tuple) else value)
            for name, value in ((n, getattr(self, n)) for n in self.__dataclass_fields__)
            if value is not None
        }


@dataclass(frozen=True)
class HostDebug:
    """Kernel settings that turn a lock the kernel's watchdogs see into a panic (issue 13).

    ``None`` leaves the host's own value. ``hardlockup_panic`` also turns the NMI watchdog
    on (``kernel.nmi_watchdog=1``): without it no hard lockup is ever detected.
    """

    softlockup_panic: bool | None = None
    hardlockup_panic: bool | None = None
    panic: int | None = None  # seconds from a panic to the reboot; 0: the host stays hung
    panic_on_oops: bool | None = None
    softlockup_all_cpu_backtrace: bool | None = None

    @property
    def is_default(self) -> bool:
        return all(getattr(self, name) is None for name in self.__dataclass_fields__)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__ if getattr(self, name) is not None}


@unique
class RuntimeKind(str, Enum):
    """How the PoC is started on a host."""

    DOCKER = "docker"  # docker run <image> python3 /poc.py
    PYTHON = "python"  # <python> poc.py, vLLM installed on the host
    VENV = "venv"  # a virtual environment per vLLM version, built once per host (no docker needed)


@dataclass(frozen=True)
class PipOptions:
    """How a ``venv`` runtime's pip finds vLLM (a mirror, a local wheelhouse, extra pins)."""

    index_url: str | None = None
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    pins: tuple[str, ...] = ()  # further requirements, e.g. "torch==2.9.0"

    def as_dict(self) -> dict[str, Any]:
        return {"index_url": self.index_url, "find_links": list(self.find_links), "no_index": self.no_index,
                "pins": list(self.pins)}


@dataclass(frozen=True)
class Runtime:
    """The software the PoC runs under (its version is an experimental factor)."""

    kind: RuntimeKind
    image: str | None = None
    python: str | None = None
    docker_args: tuple[str, ...] = ()
    vllm: str | None = None  # venv: the vLLM version installed
    pip: PipOptions = PipOptions()  # venv: where pip finds it

    @property
    def label(self) -> str:
        if self.kind is RuntimeKind.VENV:
            return f"venv-vllm-{self.vllm}"
        return (self.image or "?") if self.kind is RuntimeKind.DOCKER else (self.python or "python3")


@dataclass(frozen=True)
class Cell:
    """One matrix cell: a named combination of factors, resolved and validated."""

    name: str
    index: int
    factors: Mapping[str, Any] = field(compare=False, hash=False)
    gpu: GpuPolicy = GpuPolicy()
    env: tuple[tuple[str, str], ...] = ()
    args: tuple[tuple[str, Any], ...] = ()
    runtime: Runtime = Runtime(RuntimeKind.PYTHON)
    stop: StopRule | None = None  # this cell's own stopping rule; None: the playbook's
    cache: str | None = None  # this cell's own cache mode (CACHE_MODES); None: the playbook's
    host_debug: HostDebug = HostDebug()  # lockup-to-panic sysctls; default: the host's own


@dataclass(frozen=True)
class Timeouts:
    """Deadlines of a campaign, in seconds."""

    attempt: float = 900.0
    boot: float = 600.0
    connect: float = 10.0


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

    @property
    def judging(self) -> Judging:
        return Judging(self.reproductions, self.at_risk_phase, self.max_excluded_share)

    @property
    def reference_cell(self) -> Cell:
        return next((c for c in self.cells if c.name == self.reference), self.cells[0])

    def stop_rule(self, cell: Cell) -> StopRule:
        """The rule a cell runs under; the reference never stops early."""
        if cell.name == self.reference_cell.name:
            return StopRule()
        return cell.stop or self.stop


@dataclass(frozen=True)
class Record:
    """One attempt, as it is written to attempts.jsonl (schema ``SCHEMA_VERSION``).

    Times are ISO 8601 UTC from the controller's clock. ``policy`` holds the values read
    back from the GPU, ``factors`` what the cell asked for.
    """

    campaign: str
    attempt: str
    controller: str
    host: str
    cell: str
    factors: Mapping[str, Any]
    policy: Mapping[str, Any] | None
    runtime: Mapping[str, Any]
    cache: str | None
    attempt_index: int
    attempt_in_boot: int
    cold_boot: bool
    boot_id: str | None
    started: str
    ended: str
    outcome: Outcome
    reason: str = ""
    exit_code: int | None = None
    detect_latency_s: float | None = None
    last_heartbeat: str | None = None  # the last line heard from the host (heartbeats included)
    wedge_declared: str | None = None
    last_phase: str | None = None
    last_log_line: str | None = None
    telemetry: Mapping[str, Any] | None = None
    forensics: Mapping[str, Any] | None = None
    facts: str | None = None  # sha256 of the host facts snapshot in facts/<host>.json
    stream: str | None = None  # stream file, relative to the campaign directory
    poc: str | None = None  # sha256 of the PoC script that ran
    cell_id: str | None = None  # the cell's identity: a hash of its resolved factors, runtime and PoC
    cache_snapshot: str | None = None  # seeded: the manifest hash of the snapshot the attempt started from
    host_debug: Mapping[str, Any] | None = None  # kernel sysctls read back (a host_debug cell only)
    kernel_net: tuple[Mapping[str, Any], ...] | None = None  # netconsole: last kernel lines heard ({t, line})
    schema: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, Enum):
                value = value.value
            elif isinstance(value, Mapping):
                value = dict(value)
            out[name] = value
        return out
