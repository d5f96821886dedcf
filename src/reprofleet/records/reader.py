"""attempts.jsonl read back as typed records: the one reader every report, verdict and resume uses.

A record is written typed (``model.Record``) and read back here as a
:class:`RecordedAttempt`: its amendments folded in (``store.read_records``, the one place
that folds a file), every field given the type its readers need, and a line of an older
controller read as it always was: a field it predates is None or empty, and a cell
identity it predates is computed from its own fields (``identity.record_cell_id``).

A ``RecordedAttempt`` is also the mapping of its folded line, every key as written
(unknown ones included): the exporter writes every key, and runner/, which takes records
in that form, reads it unchanged. Outside records/ a record's fields are read as
attributes, never looked up by their JSON names (tests/unit/test_record_lookups.py fails on
one), so a renamed or retyped field is found by mypy, not by a report that prints None.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from reprofleet.model.judging import Classified, Judging
from reprofleet.model.phases import phase_note
from reprofleet.model.shutdown import orderly_shutdown
from reprofleet.model.reasons import slot_runs_again
from reprofleet.records.gpu_settings import departures
from reprofleet.records.identity import record_cell_id
from reprofleet.records.store import AMENDS, read_records

CONTENT = ("factors", "runtime", "poc")  # what makes two copies of a cell's name different experiments


def _text(line: Mapping[str, Any], key: str) -> str:
    """A field every record has; "" on a line that lacks it (an amendment read on its own)."""
    value = line.get(key)
    return "" if value is None else str(value)


def _maybe_text(line: Mapping[str, Any], key: str) -> str | None:
    value = line.get(key)
    return None if value is None else str(value)


def _number(line: Mapping[str, Any], key: str) -> int | None:
    value = line.get(key)
    return value if isinstance(value, int) else None


def _seconds(line: Mapping[str, Any], key: str) -> float | None:
    value = line.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _mapping(line: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = line.get(key)
    return value if isinstance(value, Mapping) else {}


def _flag(line: Mapping[str, Any], key: str) -> bool | None:
    value = line.get(key)
    return value if isinstance(value, bool) else None


def _stack(line: Mapping[str, Any]) -> Mapping[str, str | None]:
    value = line.get("stack")
    if not isinstance(value, Mapping):
        return {}
    return {str(k): None if v is None else str(v) for k, v in value.items()}


@dataclass(frozen=True, eq=False)
class RecordedAttempt(Mapping[str, Any]):
    """One attempt as attempts.jsonl holds it, its amendments folded in (see ``model.Record``
    for what each field means). Equal to another record, or to a dict, with the same line."""

    campaign: str
    attempt: str
    controller: str
    host: str
    cell: str
    outcome: str  # an outcome this controller may not know (a newer one's): judging it raises ValueError
    identity: str  # the cell identity it is pooled by: its ``cell_id``, or the one its fields imply
    factors: Mapping[str, Any]
    policy: Mapping[str, Any]
    runtime: Mapping[str, Any]
    cache: str | None
    attempt_index: int | None
    attempt_in_boot: int | None
    cold_boot: bool | None
    boot_id: str | None
    started: str | None
    ended: str | None
    reason: str | None
    exit_code: int | None
    detect_latency_s: float | None
    last_heartbeat: str | None
    wedge_declared: str | None
    last_phase: str | None
    phases: tuple[str, ...] | None  # None: the record predates the phase list
    # derived from its phases (model.phases.phase_note), never read from the line: the same for a record
    # written before the field existed, and no text a record file carries reaches a report this way
    phase_note: str | None
    last_log_line: str | None
    telemetry: Mapping[str, Any]
    forensics: Mapping[str, Any]
    facts: str | None
    stream: str | None
    poc: str | None
    cell_id: str | None  # as stored (None before records carried it); ``identity`` is what pools
    cache_snapshot: str | None
    host_debug: Mapping[str, Any]
    kernel_net: tuple[Mapping[str, Any], ...]
    schema: int | None
    amended: bool  # an amendment completed it (recovery's forensics, or a host that came back)
    cut: tuple[str, ...]  # where the record and its amendments were cut to a bound (store.bounded)
    line: Mapping[str, Any]  # the folded line, every key as written
    # kernel, driver, CUDA, VBIOS it ran under (records/host_stack.py): its ``stack`` as written, else
    # the facts snapshot its ``facts`` hash names (pooling.load_pool); empty: unknown (an older record)
    stack: Mapping[str, str | None] = field(default_factory=dict)

    @classmethod
    def from_json(cls, line: Mapping[str, Any]) -> "RecordedAttempt":
        """A folded line of attempts.jsonl (or a record's ``to_json()``) read as typed fields."""
        if isinstance(line, RecordedAttempt):
            return line
        phases, kernel, cut = line.get("phases"), line.get("kernel_net"), line.get("cut")
        return cls(
            campaign=_text(line, "campaign"), attempt=_text(line, "attempt"), controller=_text(line, "controller"),
            host=_text(line, "host"), cell=_text(line, "cell"), outcome=_text(line, "outcome"),
            identity=record_cell_id(line), factors=_mapping(line, "factors"), policy=_mapping(line, "policy"),
            runtime=_mapping(line, "runtime"), cache=_maybe_text(line, "cache"),
            attempt_index=_number(line, "attempt_index"), attempt_in_boot=_number(line, "attempt_in_boot"),
            cold_boot=_flag(line, "cold_boot"), boot_id=_maybe_text(line, "boot_id"),
            started=_maybe_text(line, "started"), ended=_maybe_text(line, "ended"), reason=_maybe_text(line, "reason"),
            exit_code=_number(line, "exit_code"), detect_latency_s=_seconds(line, "detect_latency_s"),
            last_heartbeat=_maybe_text(line, "last_heartbeat"), wedge_declared=_maybe_text(line, "wedge_declared"),
            last_phase=_maybe_text(line, "last_phase"),
            phases=tuple(str(p) for p in phases) if isinstance(phases, list) else None,
            phase_note=phase_note(_maybe_text(line, "last_phase"),
                                  [str(p) for p in phases] if isinstance(phases, list) else None) or None,
            last_log_line=_maybe_text(line, "last_log_line"), telemetry=_mapping(line, "telemetry"),
            forensics=_mapping(line, "forensics"), facts=_maybe_text(line, "facts"), stream=_maybe_text(line, "stream"),
            poc=_maybe_text(line, "poc"), cell_id=_maybe_text(line, "cell_id"),
            cache_snapshot=_maybe_text(line, "cache_snapshot"), host_debug=_mapping(line, "host_debug"),
            kernel_net=tuple(k for k in kernel if isinstance(k, Mapping)) if isinstance(kernel, list) else (),
            schema=_number(line, "schema"), amended=bool(line.get("amended")),
            cut=tuple(str(c) for c in cut) if isinstance(cut, list) else (),
            line=dict(line), stack=_stack(line),
        )

    # -- the line as a mapping (the exporter, runner/) ------------------------------------

    def __getitem__(self, key: str) -> Any:
        return self.line[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.line)

    def __len__(self) -> int:
        return len(self.line)

    # -- what readers ask of a record -----------------------------------------------------

    @property
    def runs_again(self) -> bool:
        """An interrupted or never-run slot: it runs again on resume and counts for nothing."""
        return slot_runs_again(self.outcome, self.reason)

    def classified(self, judging: Judging) -> Classified:
        """Its role under ``judging`` (its campaign's rules); ValueError for an outcome this
        controller does not know. A reboot or wedge whose forensics show an orderly shutdown in
        the boot before is no reproduction (records written before the agent said so too)."""
        phases = list(self.phases) if self.phases is not None else None
        return judging.classify(self.outcome, self.last_phase, phases, self.reason or None,
                                orderly=orderly_shutdown(self.forensics))

    def duration_s(self) -> float | None:
        """Seconds from its start to its end; None where either is missing or unreadable."""
        try:
            start = datetime.fromisoformat(str(self.started).replace("Z", "+00:00"))
            end = datetime.fromisoformat(str(self.ended).replace("Z", "+00:00"))
        except ValueError:
            return None
        return round((end - start).total_seconds(), 3)

    def settings_departures(self) -> tuple[str, ...]:
        """How the GPU settings read back before it differ from its cell's plan (records/gpu_settings.py)."""
        return departures(self.factors, self.policy)

    def differs_from(self, other: "RecordedAttempt") -> tuple[str, ...]:
        """Which of factors, runtime and PoC two records of one cell name ran differently, as
        recorded (a field one of them lacks differs from an empty one)."""
        return tuple(key for key in CONTENT if self.line.get(key) != other.line.get(key))


def attempts_of(records: Iterable[Mapping[str, Any]]) -> tuple[RecordedAttempt, ...]:
    """Records in either form (read here, or a bench's or a test's JSON lines) as typed records."""
    return tuple(RecordedAttempt.from_json(record) for record in records)


def read_attempts(path: Path) -> tuple[RecordedAttempt, ...]:
    """Every attempt of one attempts.jsonl, its amendments folded, in file order; none when the
    file is not there. A torn last line is skipped and a schema newer than this controller's
    is a RecordError (``store.read_records``)."""
    return attempts_of(read_records(path)) if Path(path).exists() else ()


class AttemptLines:
    """The lines of attempts.jsonl as they are appended (an observer's view, line by line).

    A record line is its attempt; an amendment is what it says on its own, with the cell of
    the attempt it amends, and only when it says an outcome (a wedge that turned out a
    reboot): a later field never changes what an earlier line was told as.
    """

    def __init__(self) -> None:
        self._cells: dict[str, str] = {}  # attempt id -> its cell, for its amendments

    def told(self, line: Mapping[str, Any]) -> RecordedAttempt | None:
        if AMENDS in line:
            cell = self._cells.get(str(line[AMENDS]))
            if cell is None or "outcome" not in line:
                return None
            return RecordedAttempt.from_json({**line, "cell": cell})
        record = RecordedAttempt.from_json(line)
        self._cells[str(line.get("attempt"))] = record.cell
        return record
