"""A host runner whose attempts are scripted (no SSH, no host): ``ScriptedRunner``, the
playbook and context it runs in, and its records.

What it writes to attempts.jsonl and events.jsonl is what a real campaign would write. Used
by the stopping, fault and event-name tests, and by the seam tests for a plain cell or book.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from pathlib import Path
from typing import Any, Callable

from reprofleet.model import (Cell, Host, Outcome, Phase, Playbook, Poc, Record, Runtime, RuntimeKind, StopRule,
                              Timeouts)
from reprofleet.records.store import AttemptLog, CampaignDir, JsonlAppender, read_records, utc_now
from reprofleet.remote.transport import TransportSettings
from reprofleet.runner.attempt import AttemptEnd
from reprofleet.runner.host import CampaignContext, HostRunner, RunSettings

POC_BYTES = b"print('the reproducer')\n"
HOST = Host(name="h1", address="127.0.0.1")


def cell(name: str, index: int, stop: StopRule | None = None) -> Cell:
    return Cell(name=name, index=index, factors={"vllm": "0.25.1", "cell": name},
                runtime=Runtime(RuntimeKind.DOCKER, image="vllm/vllm-openai:v0.25.1"), stop=stop)


def book(tmp_path: Path, *cells: Cell, attempts: int = 4, stop: StopRule = StopRule(), order: str = "interleaved",
         at_risk: Phase | None = Phase.CUDA_GRAPH_CAPTURE) -> Playbook:
    script = tmp_path / "poc.py"
    script.write_bytes(POC_BYTES)
    return Playbook(name="unit", path=str(tmp_path / "book.yml"), poc=Poc(str(script)), attempts=attempts,
                    timeouts=Timeouts(attempt=5), cells=cells, order=order, reference=cells[0].name,
                    at_risk_phase=at_risk, stop=stop)


Script = Callable[[str, int], tuple[Outcome, str | None]]


class ScriptedRunner(HostRunner):
    """A host runner whose attempts end as ``script(cell, index)`` says, without any host."""

    def __init__(self, ctx: CampaignContext, plan: list[tuple[Cell, int]], script: Script,
                 interrupt_after: int | None = None, **kwargs: Any) -> None:
        super().__init__(ctx, HOST, plan, **kwargs)
        self.script = script
        self.ran: list[tuple[str, int]] = []
        self.interrupt_after = interrupt_after

    def prepare(self) -> None:
        pass

    def run_attempt(self, cell: Cell, index: int) -> Record:
        self.ran.append((cell.name, index))
        if self.interrupt_after is not None and len(self.ran) > self.interrupt_after:
            self.ctx.stop.set()
            end = AttemptEnd(Outcome.INFRA, "interrupted: the campaign was stopped", None)
            return self._record(cell, index, str(uuid.uuid4()), utc_now(), end, None, None, "")
        outcome, phase = self.script(cell.name, index)
        record = self._record(cell, index, str(uuid.uuid4()), utc_now(), AttemptEnd(outcome, "scripted", None),
                              None, None, "")
        return dataclasses.replace(record, last_phase=phase)

    def after_wedge(self, record: Record) -> Record:
        return record  # recovered at once


def context(playbook: Playbook, root: Path, progress: Callable[..., None] = lambda host, **f: None) -> CampaignContext:
    directory = CampaignDir(root / "unit-campaign").create()
    return CampaignContext(
        campaign_id="unit-campaign", directory=directory, playbook=playbook,
        settings=RunSettings(transport=TransportSettings(known_hosts=root / "known_hosts")), bundle=None,  # type: ignore[arg-type]
        poc_script=POC_BYTES, attempt_log=AttemptLog(directory.attempts), events=JsonlAppender(directory.events),
        fleet=None, stop=threading.Event(), progress=progress,  # type: ignore[arg-type]
    )


def records_of(directory: CampaignDir) -> list[dict[str, Any]]:
    return list(read_records(directory.attempts)) if directory.attempts.exists() else []
