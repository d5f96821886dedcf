"""The text a vLLM or NVIDIA bug report asks for, from a campaign's records.

vLLM's "Bug report" issue form asks for "Your current environment" (the output of
``vllm collect-env``, in a details block) and "Describe the bug" (a minimal reproducer and
what happened); NVIDIA's driver bug reports ask for the GPU, VBIOS, driver, OS, kernel,
motherboard and BIOS, the steps, how often it happens, and ``nvidia-bug-report.log.gz``
(``nvidia-bug-report.sh`` run as root after the event). :func:`issue_markdown` writes one
Markdown block in that shape: each host's environment (from its facts, and the
``collect-env`` text where the facts carry it, else the exact command that prints it), the
exact commands per cell, the verdict table word for word, and links to each freeze's
timeline in the report.html to attach. Every host-written value goes through :func:`_code`
or :func:`_cell`, so a host's bytes cannot break out of the block they are quoted in.
"""

from __future__ import annotations

import re
from enum import Enum, unique
from typing import Any, Mapping, Sequence

from reprofleet.records.gpu_settings import readback_summary
from reprofleet.records.host_stack import stack_words
from reprofleet.records.reader import RecordedAttempt, attempts_of
from reprofleet.report.commands import commands_for
from reprofleet.report.hostfacts import fact_rows, runtimes_by_host
from reprofleet.report.markdown import quoted_reasons, verdict_rows
from reprofleet.report.markdown_text import code_block, prose
from reprofleet.verdicts import Judgement

FREEZES = ("wedge", "reboot")


@unique
class Tracker(str, Enum):
    VLLM = "vllm"
    NVIDIA = "nvidia"


def _code(text: str, lang: str = "text") -> list[str]:
    return code_block(text, lang)


def _cell(text: Any) -> str:
    """A Markdown table cell or inline words: one line, every Markdown character escaped, no control."""
    return prose(" ".join(str(text).split()))


def _stacks(records: Sequence[RecordedAttempt]) -> list[str]:
    """What each host ran under, attempt by attempt: the table above is one snapshot per host, and a
    driver that changed mid-campaign must not be read as the one every freeze ran under."""
    counts: dict[tuple[str, str], list[int]] = {}
    for record in records:
        entry = counts.setdefault((record.host, stack_words(record.stack)), [0, 0])
        entry[0] += 1
        entry[1] += record.outcome in FREEZES
    return [f"- {_cell(host)}: {_cell(stack)}: {n} attempts, {frozen} froze or reset the host"
            for (host, stack), (n, frozen) in sorted(counts.items())]


def _environment_table(facts: Mapping[str, Mapping[str, Any]], records: Sequence[RecordedAttempt]) -> list[str]:
    hosts = list(facts)
    if not hosts:
        return ["(no host facts in these folders: run `invoke facts --hosts INVENTORY` before the campaign)"]
    rows = fact_rows(facts, runtimes_by_host(records))
    lines = ["The host stack each attempt ran under (kernel, driver, CUDA, VBIOS, from the facts it recorded):",
             "", *_stacks(records), "", "Each host's facts (as its last freeze ran, else its last attempt):", "",
             "| | " + " | ".join(_cell(h) for h in hosts) + " |", "| --- |" + " --- |" * len(hosts)]
    lines += [f"| {_cell(r.label)} | " + " | ".join(_cell(v) for v in r.values) + " |" for r in rows]
    return lines


def _collect_env(facts: Mapping[str, Mapping[str, Any]], records: Sequence[RecordedAttempt]) -> list[str]:
    out = ["<details><summary>The output of <code>vllm collect-env</code> on each host</summary>", ""]
    images = {r.host: image for r in records if (image := _image_of(r))}
    for host in facts or {r.host: {} for r in records}:
        text = (facts.get(host) or {}).get("vllm_collect_env")
        out.append(f"#### {_cell(host)}")
        if text:
            out += _code(str(text))
        else:
            image = images.get(host)
            command = (f"docker run --rm --gpus all --entrypoint vllm {image} collect-env" if image
                       else "vllm collect-env   # in the venv the campaign ran vLLM from")
            out += ["Not collected by the campaign; paste what this prints on the host:", *_code(command, "bash")]
        out.append("")
    return out + ["</details>"]


def _image_of(record: RecordedAttempt) -> str | None:
    """The docker image a record ran (its runtime, else its factors' runtime), None for python."""
    runtime = record.runtime
    planned = record.factors.get("runtime") or {}
    if "docker" not in (runtime.get("kind"), planned.get("kind")):
        return None
    return runtime.get("image") or planned.get("image") or runtime.get("label")


def _reproducers(judgement: Judgement, records: Sequence[RecordedAttempt]) -> list[str]:
    out: list[str] = []
    for commands in commands_for(judgement, records):
        body = [*commands.nvidia_smi, *commands.kernel, commands.command]
        if commands.reset or commands.kernel_reset:
            body += ["# afterwards, back to the defaults:", *commands.reset, *commands.kernel_reset]
        out += [f"Cell **{_cell(commands.cell)}** (PoC sha256 {_cell(commands.poc_sha256)}):", *_code("\n".join(body),
                                                                                                       "bash"), ""]
    return out or ["(no record carries its cell's factors)"]


def _verdicts(judgement: Judgement) -> list[str]:
    return ["| cell | verdict |", "| --- | --- |",
            *(f"| {_cell(cell)} | {prose(' '.join(text.split()), quoted_reasons(judgement))} |"
              for cell, text in verdict_rows(judgement))]


def _freezes(records: Sequence[RecordedAttempt], html_name: str) -> list[str]:
    frozen = sorted((r for r in records if r.outcome in FREEZES), key=lambda r: str(r.started))
    if not frozen:
        return ["No attempt wedged or rebooted its host."]
    return [f"- {_cell(r.host)}, cell {_cell(r.cell)}, {_cell(r.outcome)} at "
            f"{_cell(r.started)}, last phase {_cell(r.last_phase or '?')}{f' ({r.phase_note})' if r.phase_note else ''}, under {_cell(stack_words(r.stack))}; "
            f"GPU settings read back {_cell(readback_summary(r.policy))}: "
            f"[its last minute]({html_name}#freeze-{re.sub(r'[^A-Za-z0-9-]', '', r.attempt)})"
            for r in frozen]


def issue_markdown(tracker: Tracker, judgement: Judgement, records: Sequence[Mapping[str, Any]],
                   facts: Mapping[str, Mapping[str, Any]], html_name: str = "report.html") -> str:
    """The Markdown block for ``tracker``'s bug report (see the module text); ``records``:
    the pool's (typed), or their JSON lines."""
    attempts = attempts_of(records)
    freezes = sum(1 for r in attempts if r.outcome in FREEZES)
    summary = (f"{freezes} of {len(attempts)} recorded attempts froze or reset their host "
               f"({len({r.host for r in attempts if r.outcome in FREEZES})} hosts). "
               f"Measured by reprofleet: every attempt is a fresh engine start; the verdicts below say what the "
               f"counts show and no more. {html_name} (attached) has every freeze's last minute.")
    if tracker is Tracker.VLLM:
        parts = ["### Your current environment", "", *_collect_env(facts, attempts), "",
                 "### 🐛 Describe the bug", "", summary, "", "#### The machines", "",
                 *_environment_table(facts, attempts), "", "#### Reproducer, per cell", "", *_reproducers(judgement, attempts),
                 "#### Results", "", *_verdicts(judgement), "", "#### Freeze timelines", "", *_freezes(attempts, html_name)]
    else:
        parts = ["## System", "", *_environment_table(facts, attempts), "", "## What happens", "", summary, "",
                 "## Steps to reproduce", "", *_reproducers(judgement, attempts), "## How often", "",
                 *_verdicts(judgement), "", "## Freeze timelines", "", *_freezes(attempts, html_name), "", "## Logs", "",
                 "`nvidia-bug-report.log.gz` from each host that froze, taken after its power cycle: "
                 "`invoke facts -i INVENTORY -l HOST --bug-report` runs `nvidia-bug-report.sh` there as root and "
                 "fetches the archive into bug-reports/HOST/ (or run `sudo nvidia-bug-report.sh` on the host)."]
    return "\n".join(parts) + "\n"
