"""Resume decides what runs again from a reason's code, and the code comes from the words in
one place: every wording a controller writes (or wrote) is pinned here with its code."""

from __future__ import annotations

import ast

import pytest

from reprofleet.campaign import run as campaign
from reprofleet.model import ReasonCode, reason_code
from tests.support import paths

SRC = paths.REPO / "src" / "reprofleet"

# Reasons as attempts.jsonl files hold them (the first two from every interrupted campaign).
WORDINGS = [
    ("interrupted: the campaign was stopped", ReasonCode.INTERRUPTED),
    ("interrupted: the controller died during this attempt; its orphan was killed on resume", ReasonCode.INTERRUPTED),
    ("not run: could not prepare the host: ws01: connection refused", ReasonCode.NOT_RUN),
    ("not run: unexpected error: KeyError: 'a bug in our own code'", ReasonCode.NOT_RUN),
    ("not run: wedged, and no recovery is configured", ReasonCode.NOT_RUN),
    ("cut by a neighbour's power cycle: ws02 was cycled through the shared outlet tasmota:http://pdu#3",
     ReasonCode.CUT),
    ("unreachable at campaign start", ReasonCode.UNREACHABLE_AT_START),
    ("unexpected error: KeyError: 'a bug in our own code'", ReasonCode.UNEXPECTED_ERROR),
    ("the agent's supervisor vanished without recording an exit", ReasonCode.OTHER),
    ("the attempt was stopped by the controller", ReasonCode.OTHER),
    ("the host was shut down in an orderly way during the attempt: systemctl is-system-running: stopping",
     ReasonCode.HOST_SHUTDOWN),
    ("ws01: host_debug not applied: kernel.softlockup_panic: asked 1, the kernel reports 0", ReasonCode.OTHER),
    ("", ReasonCode.OTHER),
]


@pytest.mark.parametrize(("words", "code"), WORDINGS)
def test_every_wording_has_its_code(words: str, code: ReasonCode) -> None:
    assert reason_code(words) is code


def test_the_words_a_writer_builds_read_back_as_their_code() -> None:
    for code in ReasonCode:
        if code is not ReasonCode.OTHER:
            assert reason_code(code.words("a detail")) is code
            assert reason_code(code.words()) is code
    assert ReasonCode.INTERRUPTED.words("the campaign was stopped") == "interrupted: the campaign was stopped"
    assert ReasonCode.UNREACHABLE_AT_START.words() == "unreachable at campaign start"


def test_only_interrupted_and_never_run_slots_run_again() -> None:
    """... and one an orderly shutdown of the host stopped (a person's reboot, an upgrade's)."""
    assert {c for c in ReasonCode if c.runs_again_on_resume} == {ReasonCode.INTERRUPTED, ReasonCode.NOT_RUN, ReasonCode.CUT,
                                                                  ReasonCode.HOST_SHUTDOWN}


@pytest.mark.parametrize(("record", "again"), [
    ({"outcome": "infra", "reason": "interrupted: the campaign was stopped"}, True),
    ({"outcome": "infra", "reason": "not run: quarantined"}, True),
    ({"outcome": "infra", "reason": "the host was shut down in an orderly way during the attempt: "
                                    "unattended-upgrades (automatic reboot after an upgrade)"}, True),
    ({"outcome": "infra", "reason": "unreachable at campaign start"}, False),
    ({"outcome": "infra", "reason": "cannot prepare the cache /x"}, False),
    ({"outcome": "infra"}, False),
    ({"outcome": "error", "reason": "interrupted: words of an error that is no infra"}, False),
])
def test_resume_reads_the_code_of_infra_records(record: dict, again: bool) -> None:
    assert campaign.runs_again(record) is again


def test_no_module_but_model_reasons_matches_a_reasons_wording() -> None:
    """The words are written through ReasonCode.words and read through reason_code only."""
    heads = ("interrupted", "not run", "unreachable at campaign start")
    offenders = []
    for path in SRC.rglob("*.py"):
        if path == SRC / "model" / "reasons.py" or "sim" in path.relative_to(SRC).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(heads):
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno}: {node.value!r}")
    assert offenders == []
