"""invoke report --issue: the Markdown a vLLM or NVIDIA bug report asks for, from the records
(a synthetic campaign of tests/support/synthetic_campaign.py), with host text that cannot break out."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from reprofleet.records.pooling import load_pool
from reprofleet.report import render_html, render_markdown
from reprofleet.report.folders import Folders
from reprofleet.report.issue_text import Tracker, issue_markdown
from reprofleet.verdicts import judge
from tests.support.paths import REPO as ROOT
from tests.support.synthetic_campaign import Spec, build, write


@pytest.fixture(scope="module")
def pooled(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    content = build(Spec())
    content["records"][0]["last_phase"] = "capture ``` | [x](http://evil) <b>"  # a host's bytes
    folder = write(tmp_path_factory.mktemp("c") / "synthetic-1", content)
    pool = load_pool([folder])
    return pool, judge(pool)


def text_for(pooled, tracker: Tracker) -> str:  # type: ignore[no-untyped-def]
    pool, judgement = pooled
    return issue_markdown(tracker, judgement, pool.records, Folders.of(pool).facts(pool.records))


def test_the_vllm_block_has_the_forms_sections_each_hosts_environment_and_the_commands_per_cell(pooled) -> None:  # type: ignore[no-untyped-def]
    text = text_for(pooled, Tracker.VLLM)
    assert text.index("### Your current environment") < text.index("### 🐛 Describe the bug")
    assert text.count("Not collected by the campaign") == 2  # both hosts: the exact command instead
    assert "docker run --rm --gpus all --entrypoint vllm vllm/vllm-openai:v0.25.1 collect-env" in text
    assert "nvidia-smi -i 0 -lgc 180,2800" in text and "nvidia-smi -i 0 -pl 350" in text  # the cells' own settings
    assert "| VBIOS |" in text  # the machines side by side


def test_its_verdicts_are_report_mds_word_for_word(pooled) -> None:  # type: ignore[no-untyped-def]
    pool, judgement = pooled
    markdown = render_markdown(judgement, pool.records, "t")
    ours = [line for line in text_for(pooled, Tracker.VLLM).splitlines() if line.startswith("| ") and " | " in line
            and line.split(" | ")[0].strip("| \\").replace("\\", "") in {v.cell for v in judgement.verdicts}]
    theirs = markdown.split("## Verdicts", 1)[1]
    for line in ours:
        cell, verdict = [part.strip() for part in line.strip("|").split(" | ", 1)]
        assert verdict.replace("\\", "") in theirs.replace("\\", "")


def test_every_freeze_links_to_its_own_anchor_in_report_html(pooled) -> None:  # type: ignore[no-untyped-def]
    pool, judgement = pooled
    page = render_html(judgement, pool, "t")
    links = re.findall(r"\(report\.html#(freeze-[A-Za-z0-9-]+)\)", text_for(pooled, Tracker.NVIDIA))
    frozen = [r for r in pool.records if r.get("outcome") in ("wedge", "reboot")]
    assert len(links) == len(frozen) > 0
    assert all(f'id="{anchor}"' in page for anchor in links)


def test_the_nvidia_block_has_system_steps_how_often_and_logs(pooled) -> None:  # type: ignore[no-untyped-def]
    text = text_for(pooled, Tracker.NVIDIA)
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads == ["## System", "## What happens", "## Steps to reproduce", "## How often", "## Freeze timelines",
                     "## Logs"]
    assert "nvidia-bug-report.sh" in text


def test_host_text_stays_inside_its_cell_and_its_fence(pooled) -> None:  # type: ignore[no-untyped-def]
    text = text_for(pooled, Tracker.VLLM)
    line = next(line for line in text.splitlines() if "capture" in line and "evil" in line)
    assert "\\`\\`\\`" in line and "\\|" in line and "\\[x\\]" in line and "<b>" not in line
    assert not re.search(r"(?<!\\)\]\(http://evil", text)  # no live link


def test_the_task_writes_the_block_beside_report_md_and_refuses_an_unknown_tracker(tmp_path: Path) -> None:
    folder = write(tmp_path / "c" / "synthetic-1", build(Spec()))
    done = subprocess.run([sys.executable, "-m", "reprofleet", "report", str(folder), "--out", str(tmp_path / "out"),
                           "--issue", "vllm"], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "issue-vllm.md").read_text().startswith("### Your current environment")
    wrong = subprocess.run([sys.executable, "-m", "reprofleet", "report", str(folder), "--issue", "jira"], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and wrong.stderr.strip().splitlines() == [
        "reprofleet: error: --issue takes vllm or nvidia, not 'jira'"]
