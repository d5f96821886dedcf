"""What a simulated BMC would log about its host: power going off and on, and a wedge.

A BMC sees its host's power rail and, on servers with firmware-first error handling, a
PCIe fatal error when a GPU falls off the bus. The simulated BMCs (ipmi_sim's SEL, the
Redfish front's LogServices) watch the same files the hardware daemon keeps: the host's
switch (``<host>/hw/power``) and its published state (``<host>/hw/state.json``, whose
``frozen`` turns true at a wedge). A switch outside a simulated host has no state file and
only ever logs power events.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from enum import Enum, unique
from pathlib import Path

from .switch import read_switch


@unique
class HostEventKind(str, Enum):
    POWER_OFF = "power_off"
    POWER_ON = "power_on"
    WEDGE = "wedge"


@dataclass(frozen=True)
class HostEvent:
    kind: HostEventKind
    t: float


def read_frozen(switch: Path) -> bool:
    """Is the host behind ``switch`` frozen now (per the hardware daemon's state file)?"""
    try:
        return bool(json.loads((switch.parent / "state.json").read_text()).get("frozen"))
    except (OSError, ValueError, AttributeError):
        return False


class HostWatch:
    """Turns changes of one host's switch and frozen flag into events (poll it often)."""

    def __init__(self, switch: Path) -> None:
        self.switch = switch
        self.on = read_switch(switch)
        self.frozen = read_frozen(switch)

    def poll(self) -> list[HostEvent]:
        now = time.time()
        on, frozen = read_switch(self.switch), read_frozen(self.switch)
        events = []
        if on != self.on:
            events.append(HostEvent(HostEventKind.POWER_ON if on else HostEventKind.POWER_OFF, now))
        if frozen and not self.frozen and on:
            events.append(HostEvent(HostEventKind.WEDGE, now))
        self.on, self.frozen = on, frozen
        return events
