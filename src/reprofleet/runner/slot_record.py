"""One host's records: built once from what an attempt showed, appended and fsync'd, amended.

A slot's record is on disk the moment its outcome is known (a wedge at its declaration);
what recovery learns afterwards is an amendment of the same attempt, never a second record.
A controller that cannot write stops the whole campaign (``ControllerDiskError``).
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any, Callable, Mapping

from reprofleet.errors import ControllerDiskError
from reprofleet.model import Cell, Host, Outcome, Record, phase_note
from reprofleet.model.reasons import ReasonCode
from reprofleet.power.wall import WallPowerSampler, freeze_telemetry
from reprofleet.records import identity
from reprofleet.records.store import iso_utc
from reprofleet.runner.attempt import AttemptEnd, AttemptTrace
from reprofleet.runner.context import CampaignContext, identity_factors, record_runtime
from reprofleet.runner.link import BootState

__all__ = ["SlotRecorder", "attempt_telemetry"]


class SlotRecorder:
    """Builds, appends and amends one host's records (the only writer of its attempts)."""

    def __init__(self, ctx: CampaignContext, host: Host, runtime_fields: Callable[[Cell], Mapping[str, Any]],
                 boot: Callable[[], BootState]) -> None:
        self.ctx = ctx
        self.host = host
        self.runtime_fields = runtime_fields  # the runtime's resolved facts (image digest, versions)
        self.boot = boot  # the boot the host is in, as its link last read it
        self.facts_hash: str | None = None  # the host facts the next records carry

    def _runtime(self, cell: Cell) -> dict[str, Any]:
        return {**record_runtime(cell), **self.runtime_fields(cell)}

    def _cell_id(self, cell: Cell, runtime: Mapping[str, Any]) -> str:
        return identity.cell_id(cell.name, identity_factors(cell, self.ctx.secret_digests), dict(runtime),
                                self.ctx.poc_digest)

    def infra(self, cell: Cell, index: int, reason: str, attempt_id: str | None = None) -> Record:
        """A slot that did not run (or whose run cannot be judged), with the reason."""
        now = str(iso_utc(self.ctx.clock.wall()))
        runtime = self._runtime(cell)
        return Record(
            campaign=self.ctx.campaign_id, attempt=attempt_id or str(uuid.uuid4()),
            controller=self.ctx.settings.controller, host=self.host.name, cell=cell.name,
            factors=dict(cell.factors), policy=None, runtime=runtime, cache=None,
            attempt_index=index, attempt_in_boot=0, cold_boot=False, boot_id=self.boot().boot_id,
            started=now, ended=now, outcome=Outcome.INFRA, reason=reason,
            facts=self.facts_hash, poc=self.ctx.poc_digest, cell_id=self._cell_id(cell, runtime),
        )

    def not_run(self, cell: Cell, index: int, why: str) -> Record:
        """A slot a quarantined host does not run: ``not run``, with the quarantine's reason."""
        return self.infra(cell, index, ReasonCode.NOT_RUN.words(why))

    def attempt(self, cell: Cell, index: int, attempt_id: str, started: str, end: AttemptEnd,
                readback: Mapping[str, Any] | None, trace: AttemptTrace | None, *, followed: bool,
                cache_manifest: str | None = None, cache_snapshot: str | None = None,
                wall: WallPowerSampler | None = None) -> Record:
        """The record of an attempt that was started (or followed on resume): ``followed``
        when its stream was read (a stream file exists)."""
        exit_line = end.exit or {}
        runtime = self._runtime(cell)
        boot = self.boot()
        last_hb = trace.last_heard_wall if trace else None
        return Record(
            campaign=self.ctx.campaign_id, attempt=attempt_id, controller=self.ctx.settings.controller,
            host=self.host.name, cell=cell.name, factors=dict(cell.factors), policy=readback,
            runtime=runtime,
            cache=cache_manifest if self.ctx.playbook.poc.mode(cell) != "fresh" and followed else None,
            cache_snapshot=cache_snapshot if followed else None,
            attempt_index=index, attempt_in_boot=boot.attempts_in_boot, cold_boot=boot.cold,
            boot_id=boot.boot_id, started=started, ended=str(iso_utc(self.ctx.clock.wall())), outcome=end.outcome,
            reason=end.reason, exit_code=exit_line.get("rc"), detect_latency_s=end.detect_latency_s,
            last_heartbeat=iso_utc(last_hb),
            wedge_declared=iso_utc(end.declared_wall),
            last_phase=trace.last_phase if trace else None,
            phases=tuple(phase for _, phase in trace.phases) if trace else None,
            phase_note=(phase_note(trace.last_phase, [phase for _, phase in trace.phases]) or None) if trace else None,
            last_log_line=trace.last_log_line if trace else None,
            telemetry=attempt_telemetry(exit_line, trace, end.outcome, wall),
            forensics=None, facts=self.facts_hash,
            stream=f"streams/{attempt_id}.jsonl" if followed else None,
            poc=self.ctx.poc_digest, cell_id=self._cell_id(cell, runtime),
            forged_lines=trace.forged_lines if trace else 0,
        )

    def check_disk(self, free_bytes: Callable[[Path], int] | None = None) -> None:
        """Before an attempt: the campaign folder's disk keeps ``disk_floor_mb`` free, so a wedge's
        record, its amendments and the power log always have room; below it no attempt starts
        and the whole campaign stops, with the path and the numbers."""
        root = self.ctx.directory.root
        free = (free_bytes or _free_bytes)(root)
        floor = self.ctx.settings.disk_floor_mb * 2**20
        if free < floor:
            raise ControllerDiskError(f"the controller's disk holding {root} has {free / 2**20:.0f} MiB free, below "
                                      f"the floor of {floor / 2**20:.0f} MiB (disk_floor_mb): no attempt is started, "
                                      "so a wedge's record and its power log always have room")

    def append(self, record: Record) -> None:
        """Append and fsync a record; a controller that cannot write stops the whole campaign."""
        try:
            self.ctx.attempt_log.append_record(record)
            self.ctx.ledger.record(record.attempt)
        except OSError as exc:
            raise ControllerDiskError(f"cannot write {self.ctx.directory.attempts}: {exc}; the campaign stops "
                                      "(each host is given back what it can as it stops; the end says which were)"
                                      ) from exc

    def amend(self, declared: Record, final: Record) -> None:
        """What recovery changed in a record written at declaration."""
        before, after = declared.to_json(), final.to_json()
        changed = {k: v for k, v in after.items() if before.get(k) != v and k not in ("attempt", "schema")}
        if changed:
            try:
                self.ctx.attempt_log.amend(declared.attempt, **changed)
            except OSError as exc:
                raise ControllerDiskError(f"cannot write {self.ctx.directory.attempts}: {exc}") from exc

    def amend_failed(self, declared: Record, reason: str) -> None:
        """A recovery that raised: its declared record says so."""
        self.ctx.attempt_log.amend(declared.attempt, forensics={"recovery": "failed", "error": reason})


def _free_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


def attempt_telemetry(exit_line: Mapping[str, Any], trace: AttemptTrace | None, outcome: Outcome | None,
                      wall: WallPowerSampler | None) -> dict[str, Any] | None:
    """The host's own summary (it exited), or the last NVML sample it sent (it froze),
    plus the wall power its outlet metered last (a freeze: the last minute of it, or why not)."""
    telemetry = dict(exit_line.get("telemetry") or ({"last_sample": trace.last_nvml} if trace and trace.last_nvml
                                                    else {}))
    if wall is not None and wall.meters and wall.last():
        telemetry.update(wall.summary())
    if outcome in (Outcome.WEDGE, Outcome.REBOOT):
        telemetry.update(freeze_telemetry(wall, trace.last_heard_wall if trace else None))
    return telemetry or None
