"""The exact commands that reproduce one attempt of each cell by hand, from its records.

An engineer who gets the report wants to try one cell on their own machine without
reprofleet: the GPU settings the cell applied (``nvidia-smi -pm/-pl/-lgc/-lmc/-ac``, in the
agent's order), its environment, and the docker or python command line that
:func:`reprofleet.runner.poc.build` makes for it, built from the factors the records carry.
"""

from __future__ import annotations

import html
import shlex
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from reprofleet.runner import poc
from reprofleet.records.reader import RecordedAttempt, attempts_of
from reprofleet.model import Cell, GpuPolicy, Runtime, RuntimeKind
from reprofleet.verdicts import Judgement
from reprofleet.report.host_debug import sysctl_commands

POC_FILE = "/path/to/poc.py"  # the campaign's PoC script; its sha256 is shown beside the command
STATE_ROOT = "/var/tmp/reprofleet"  # nosec B108  # the agent's state root on the host, printed in commands for a person; never opened here


@dataclass(frozen=True)
class HandCommands:
    cell: str
    nvidia_smi: tuple[str, ...]
    reset: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    command: str
    poc_sha256: str
    kernel: tuple[str, ...] = ()  # host_debug: the lockup-panic sysctls
    kernel_reset: tuple[str, ...] = ()


def _pair(value: Any) -> tuple[int, int] | None:
    return (int(value[0]), int(value[1])) if isinstance(value, (list, tuple)) and len(value) == 2 else None


def cell_from_factors(name: str, factors: Mapping[str, Any]) -> Cell:
    """A record's factors back into the cell that ran (enough for the PoC's command line)."""
    runtime = factors.get("runtime") or {}
    kind = RuntimeKind(runtime.get("kind") or "python")
    power = factors.get("power_limit")
    gpu = GpuPolicy(graphics_clocks=_pair(factors.get("graphics_clocks")), memory_clocks=_pair(factors.get("memory_clocks")),
                    power_limit_w=float(power) if isinstance(power, (int, float)) else None,
                    persistence=factors.get("persistence"), application_clocks=_pair(factors.get("application_clocks")))
    return Cell(name=name, index=0, factors=dict(factors), gpu=gpu,
                env=tuple(sorted((str(k), str(v)) for k, v in (factors.get("env") or {}).items())),
                args=tuple((str(k), v) for k, v in (factors.get("args") or {}).items()),
                runtime=Runtime(kind, runtime.get("image"), runtime.get("python"), tuple(runtime.get("docker_args") or ())))


def nvidia_smi_lines(gpu: GpuPolicy, index: int = 0) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The settings calls and the calls that put the card back, in the agent's order."""
    apply: list[str] = []
    reset: list[str] = []
    smi = f"sudo nvidia-smi -i {index}"
    if gpu.persistence is not None:
        apply.append(f"{smi} -pm {1 if gpu.persistence else 0}")
    if gpu.power_limit_w is not None:
        apply.append(f"{smi} -pl {gpu.power_limit_w:g}")
        reset.append(f"{smi} -pl <the card's default limit, see the host facts>")
    for pair, set_flag, reset_flag in ((gpu.graphics_clocks, "-lgc", "-rgc"), (gpu.memory_clocks, "-lmc", "-rmc"),
                                       (gpu.application_clocks, "-ac", "-rac")):
        if pair is not None:
            apply.append(f"{smi} {set_flag} {pair[0]},{pair[1]}")
            reset.append(f"{smi} {reset_flag}")
    return tuple(apply), tuple(reset)


def hand_commands(name: str, record: RecordedAttempt) -> HandCommands:
    cell = cell_from_factors(name, record.factors)
    built = poc.build(cell, poc_path=POC_FILE, state_root=STATE_ROOT, attempt_id="by-hand", persistent=True, gpu=0)
    apply, reset = nvidia_smi_lines(cell.gpu)
    env = built.env if cell.runtime.kind is RuntimeKind.PYTHON else cell.env
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in built.env)
    command = shlex.join(built.argv)
    return HandCommands(name, apply, reset, tuple(env), f"{prefix} {command}".strip(), str(record.poc or "?"),
                        *sysctl_commands(record.factors))


def commands_for(judgement: Judgement, records: Sequence[Mapping[str, Any]]) -> list[HandCommands]:
    """One set of commands per verdict's cell, from the first record of that cell's identity
    that carries its factors. ``records``: typed, or their JSON lines."""
    attempts = attempts_of(records)
    found = []
    for verdict in judgement.verdicts:
        record = next((r for r in attempts if r.identity == verdict.cell_id and r.factors), None)
        if record is not None:
            found.append(hand_commands(verdict.cell, record))
    return found


def commands_html(judgement: Judgement, records: Sequence[Mapping[str, Any]]) -> str:
    blocks = []
    for item in commands_for(judgement, records):
        lines = ["# GPU settings this cell applies (none: the card's defaults)", *item.nvidia_smi] if item.nvidia_smi \
            else ["# this cell keeps the card's default settings"]
        if item.kernel:
            lines += ["", "# kernel lockup panics this cell sets (host_debug)", *item.kernel]
        if item.env:
            lines += ["", "# environment of the PoC process", *(f"{k}={v}" for k, v in item.env)]
        lines += ["", f"# the PoC script: sha256 {item.poc_sha256}", item.command]
        if item.reset:
            lines += ["", "# afterwards, put the card back", *item.reset]
        if item.kernel_reset:
            lines += ["", "# afterwards, the host's own kernel settings back", *item.kernel_reset]
        blocks.append(f"<h3>{html.escape(item.cell)}</h3><pre class=\"cmd\">{html.escape(chr(10).join(lines))}</pre>")
    if not blocks:
        return '<p class="note">The records carry no factors to build a command line from.</p>'
    return "\n".join(blocks)
