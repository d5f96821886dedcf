"""A host as the inventory describes it: connection, GPU, power ports, netconsole, recovery ladder."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, unique
from typing import Any, Mapping

from reprofleet.model.values import frozen_mapping


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
    ``listen`` is the controller's side: the address its receiver binds (never every interface).
    """

    port: int = 6666
    dev: str | None = None
    target: str | None = None
    extended: bool = True  # the kernel's extended header (level, seq, usec): order survives loss
    listen: str | None = None  # the controller's address the receiver binds; None: its address on the route to the host
    where: str = field(default="", compare=False, hash=False)  # inventory file:line of the block


@unique
class RecoveryRung(str, Enum):
    """One rung of a wedged host's recovery ladder (the inventory's ``recovery: [nmi, cycle]``).

    ``nmi``: a diagnostic interrupt through the host's BMC (or a fence agent's ``diag``); a
    kernel set to panic on it writes a vmcore and reboots, which is evidence an AC cut erases.
    ``cycle``: the power cycle (off, dwell, on), the rung that always brings a host back.
    """

    NMI = "nmi"
    CYCLE = "cycle"


class GpuAccess(str, Enum):
    """What a campaign may do to a host's GPU (the inventory's ``gpu_policy``).

    ``manage`` (the default): the controller sets and restores clocks, power limit and
    persistence through ``nvidia-smi``. ``observe``: a machine we do not own (a shared box,
    a cloud GPU): no setter ever runs there, the card is only read back, and a cell that
    asks for a setting is refused for that host before anything runs.
    """

    MANAGE = "manage"
    OBSERVE = "observe"


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
    gpu_access: GpuAccess = GpuAccess.MANAGE  # ``gpu_policy: observe``: never a GPU setter on this host
    # ``pdu: {fallback: [...]}``: further devices, in order, each used only when the one before cannot
    # verify its action (Pacemaker's fencing levels); each level is every outlet it switches
    power_fallbacks: tuple[tuple[PowerPort, ...], ...] = ()
    recovery: tuple[RecoveryRung, ...] = (RecoveryRung.CYCLE,)  # the ladder a wedge climbs, in order
    recovery_where: str = field(default="", compare=False, hash=False)  # inventory file:line of ``recovery``
    nmi_reboot_s: float | None = None  # after an NMI, wait this long for a new boot (None: the playbook's)

    @property
    def observe_only(self) -> bool:
        return self.gpu_access is GpuAccess.OBSERVE

    @property
    def power_ports(self) -> tuple[PowerPort, ...]:
        """Every outlet that feeds this host: all are switched off before any is switched on."""
        return ((self.pdu,) if self.pdu is not None else ()) + self.more_pdus
