"""Values that cross module lines: frozen dataclasses and unique enums.

Nothing here does I/O. Modules exchange these instead of bare dicts so that a reader can
see what a host, a cell or an attempt record *is* in one place. Every name is re-exported
here, so ``from reprofleet.model import Host`` works whichever module defines it.

Modules: ``values`` (read-only mappings), ``outcomes`` (Outcome, Phase, Role), ``phases``
(each engine generation's phase order, where an attempt ended against the phase at risk),
``judging`` (Judging, StopRule), ``stream`` (the kinds of stream line), ``hosts`` (Host, PowerPort,
CredentialRef, NetconsoleSetting, GpuAccess), ``cells`` (Cell, GpuPolicy, HostDebug, Runtime),
``playbook`` (Playbook, Poc, Timeouts), ``records`` (Record, the schema version),
``events`` (the campaign's event names), ``reasons`` (typed reasons an attempt was not judged),
``search`` (a playbook's ``search:`` and ``bisect:`` blocks), ``shutdown`` (whether a record's
forensics show an orderly shutdown, and who asked), ``names`` (host, group and cell names that
become file names).
"""

from __future__ import annotations

from reprofleet.model.values import frozen_mapping
from reprofleet.model.outcomes import Outcome, PHASE_ORDER, Phase, Role, outcome_counts, phase_reached
from reprofleet.model.phases import CAPTURE_NEXT_NOTE, START_ORDER, PhasePosition, phase_note
from reprofleet.model.judging import (DEFAULT_FIXED_RATIO, DEFAULT_MAX_EXCLUDED_SHARE, DEFAULT_REPRODUCTIONS, Classified,
                                      EarlyReproductions, Judging, StopKind, StopRule)
from reprofleet.model.stream import EventKind
from reprofleet.model.hosts import CredentialRef, GpuAccess, Host, NetconsoleSetting, PowerPort, RecoveryRung
from reprofleet.model.cells import Cell, GpuPolicy, HostDebug, PipOptions, Runtime, RuntimeKind
from reprofleet.model.search import BisectBlock, SearchBlock
from reprofleet.model.playbook import CACHE_MODES, EnvSecret, Playbook, Poc, Timeouts
from reprofleet.model.records import Record, SCHEMA_VERSION
from reprofleet.model.events import CampaignEvent, event_of
from reprofleet.model.reasons import ReasonCode, reason_code
from reprofleet.model.shutdown import orderly_shutdown
from reprofleet.model.names import NAME_RULE, SAFE_NAME, UnsafeName, file_name, is_safe_name, unsafe_name_reason

__all__ = [
    "NAME_RULE", "SAFE_NAME", "UnsafeName", "file_name", "is_safe_name", "unsafe_name_reason",
    "BisectBlock",
    "SearchBlock",
    "CACHE_MODES",
    "CampaignEvent",
    "Cell",
    "Classified",
    "CredentialRef",
    "DEFAULT_FIXED_RATIO",
    "DEFAULT_MAX_EXCLUDED_SHARE",
    "DEFAULT_REPRODUCTIONS",
    "EarlyReproductions",
    "CAPTURE_NEXT_NOTE",
    "EventKind",
    "GpuAccess",
    "RecoveryRung",
    "GpuPolicy",
    "Host",
    "HostDebug",
    "Judging",
    "NetconsoleSetting",
    "Outcome",
    "PHASE_ORDER",
    "START_ORDER",
    "Phase",
    "PhasePosition",
    "PipOptions",
    "EnvSecret",
    "Playbook",
    "Poc",
    "PowerPort",
    "ReasonCode",
    "Record",
    "Role",
    "Runtime",
    "RuntimeKind",
    "SCHEMA_VERSION",
    "StopKind",
    "StopRule",
    "Timeouts",
    "frozen_mapping",
    "phase_note",
    "phase_reached",
    "reason_code",
    "orderly_shutdown",
    "outcome_counts",
    "event_of",
]
