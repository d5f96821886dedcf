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

from reprofleet.errors import ConnectError
from reprofleet.liveness.probes import ProbeAnswer
from reprofleet.model import (Cell, Host, Outcome, Phase, Playbook, Poc, Record, Runtime, RuntimeKind, StopRule,
                              Timeouts)
from reprofleet.records.store import AttemptLog, CampaignDir, JsonlAppender, read_records, utc_now
from reprofleet.remote.transport import TransportSettings
from reprofleet.runner.attempt import AttemptEnd
from reprofleet.runner.attempt_run import PushedFiles
from reprofleet.runner.host import CampaignContext, HostRunner, RunSettings
from reprofleet.runner.recovery import Recovered
from reprofleet.runner.slot_record import SlotRecorder

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
Fault = Callable[[Cell, int], None]  # raises to play a bug, a full disk ... in an attempt


class ScriptedAttempts:
    """The attempt seam of a HostRunner (``runner.attempts``): each attempt ends as ``script``
    says, its record built by the runner's own recorder, without any host."""

    def __init__(self, recorder: SlotRecorder, script: Script, stop: threading.Event,
                 interrupt_after: int | None = None, fault: Fault | None = None) -> None:
        self.recorder = recorder
        self.script = script
        self.stop = stop
        self.interrupt_after = interrupt_after
        self.fault = fault
        self.ran: list[tuple[str, int]] = []
        self.pushed = PushedFiles()
        self.refused = False
        self.failed_attempt: str | None = None

    def run(self, cell: Cell, index: int, resume: Any = None) -> Record:
        self.ran.append((cell.name, index))
        if self.fault is not None:
            self.fault(cell, index)
        if self.interrupt_after is not None and len(self.ran) > self.interrupt_after:
            self.stop.set()
            end = AttemptEnd(Outcome.INFRA, "interrupted: the campaign was stopped", None)
            return self.recorder.attempt(cell, index, str(uuid.uuid4()), utc_now(), end, None, None, followed=False)
        outcome, phase = self.script(cell.name, index)
        record = self.recorder.attempt(cell, index, str(uuid.uuid4()), utc_now(),
                                       AttemptEnd(outcome, "scripted", None), None, None, followed=False)
        return dataclasses.replace(record, last_phase=phase)


class ScriptedPreparation:
    """The preparation seam: nothing to push to a host that does not exist (or ``refuse`` says why not)."""

    def __init__(self, refuse: BaseException | None = None) -> None:
        self.refuse = refuse
        self.prepared = False

    def prepare(self, cells: Any) -> PushedFiles:
        if self.refuse is not None:
            raise self.refuse
        return PushedFiles()


class ScriptedRecovery:
    """The recovery seam: a silent host is back at once (``forensics`` attached when given), or
    ``raises`` plays a recovery that cannot go on."""

    def __init__(self, forensics: dict[str, Any] | None = None, raises: BaseException | None = None,
                 before: Callable[[Record], None] | None = None) -> None:
        self.forensics = forensics
        self.raises = raises
        self.before = before
        self.recovered: list[Record] = []

    def explain(self, record: Record, since: float) -> Record:
        return record  # neither a neighbour's cut nor an outlet that reads off

    def recover(self, record: Record) -> Recovered:
        if self.before is not None:
            self.before(record)
        if self.raises is not None:
            raise self.raises
        self.recovered.append(record)
        return Recovered(record if self.forensics is None else dataclasses.replace(record, forensics=self.forensics))

    forensics_after_the_fact = switch_back_on = recover


class ScriptedPort:
    """The host seam of a runner without a host: every probe finds sshd answering (the host is
    there; an attempt that ends without a stream is the script's, not a silence), no session."""

    def __init__(self, answer: ProbeAnswer = ProbeAnswer.SSHD) -> None:
        self.answer = answer
        self.probes = 0

    def probe(self, timeout_s: float) -> ProbeAnswer:
        self.probes += 1
        return self.answer

    def banner(self, timeout_s: float) -> bool:
        return self.answer is ProbeAnswer.SSHD

    def connect(self) -> Any:
        raise ConnectError(HOST.name, "a scripted host has no session")  # as an unreachable host's connect

    def power(self, log: Any) -> Any:
        raise AssertionError("a scripted runner has no outlets")

    def wall_sampler(self, write: Any) -> Any:
        raise AssertionError("a scripted runner samples no wall power")


class ScriptedRunner:
    """A HostRunner with scripted parts at its seams (attempts, preparation, recovery), no host.

    It is the real plan loop (stop rules, streaks, quarantine, records and amendments), reached
    through the same attributes a campaign uses: ``run()``, ``state``, ``ctx``."""

    def __init__(self, ctx: CampaignContext, plan: list[tuple[Cell, int]], script: Script,
                 interrupt_after: int | None = None, *, fault: Fault | None = None,
                 recovery: Any = "at once", refuse_prepare: BaseException | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("port", ScriptedPort())
        self.runner = HostRunner(ctx, HOST, plan, **kwargs)
        self.attempts = ScriptedAttempts(self.runner.recorder, script, ctx.stop, interrupt_after, fault)
        self.runner.attempts = self.attempts  # type: ignore[assignment]
        self.runner.preparation = ScriptedPreparation(refuse_prepare)  # type: ignore[assignment]
        self.runner.recovery = ScriptedRecovery() if recovery == "at once" else recovery

    @property
    def ctx(self) -> CampaignContext:
        return self.runner.ctx

    @property
    def state(self) -> Any:
        return self.runner.state

    @property
    def ran(self) -> list[tuple[str, int]]:
        return self.attempts.ran

    def run(self) -> None:
        self.runner.run()


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
