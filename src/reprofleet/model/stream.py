"""The kinds of JSON line on an attempt's stream (collectors/PROTOCOL.md)."""

from __future__ import annotations

from enum import Enum, unique


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
