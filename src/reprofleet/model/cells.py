"""One matrix cell: its GPU policy, kernel lockup settings, runtime, env and arguments."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, unique
from typing import Any, Mapping

from reprofleet.model.judging import StopRule


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
