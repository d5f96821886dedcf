"""Values that cross module lines: frozen dataclasses and unique enums.

Nothing here does I/O. Modules exchange these instead of bare dicts so that a reader can
see what a host, a cell or an attempt record *is* in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, unique
from types import MappingProxyType
from typing import Any, Mapping

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


@unique
class RuntimeKind(str, Enum):
    """How the PoC is started on a host."""

    DOCKER = "docker"  # docker run <image> python3 /poc.py
    PYTHON = "python"  # <python> poc.py, vLLM installed on the host


@dataclass(frozen=True)
class Runtime:
    """The software the PoC runs under (its version is an experimental factor)."""

    kind: RuntimeKind
    image: str | None = None
    python: str | None = None
    docker_args: tuple[str, ...] = ()

    @property
    def label(self) -> str:
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
    cache: str = "persistent"  # "persistent" (one cache dir per host and runtime) or "fresh"
    cache_source: str | None = None  # optional controller dir pushed as the starting cache


@dataclass(frozen=True)
class Playbook:
    """A validated campaign definition."""

    name: str
    path: str
    poc: Poc
    attempts: int
    timeouts: Timeouts
    cells: tuple[Cell, ...]
    order: str = "interleaved"  # "interleaved" | "sequential" | "shuffled"
    reproductions: tuple[Outcome, ...] = (Outcome.WEDGE,)
    description: str = ""
    seed: int | None = None


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
