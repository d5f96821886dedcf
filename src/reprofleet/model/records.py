"""One attempt's record, as appended to attempts.jsonl (schema versioned)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Mapping

from reprofleet.model.outcomes import Outcome


SCHEMA_VERSION = 1


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
    phases: tuple[str, ...] | None = None  # every phase entered, in order: which engine order applies (model.phases)
    # where the log cannot tell whether it stopped before or inside the phase at risk (model.phases.phase_note):
    # "after kernel warmup; capture starts next"; None where it can
    phase_note: str | None = None
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
    forged_lines: int = 0  # stream lines without the attempt's MAC (the PoC's own writes): ignored, counted
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
