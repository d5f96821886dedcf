"""The playbook keys that decide what counts mean and when a cell may stop early:
``reproductions``, ``reference``, ``at_risk_phase``, ``max_excluded_share``, ``fixed_ratio``,
``early_reproductions`` and ``stop``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from reprofleet.errors import PlaybookError
from reprofleet.model import EarlyReproductions, Judging, Outcome, Phase, Playbook, StopKind, StopRule
from reprofleet.playbook import load_playbook


def write(tmp_path: Path, text: str) -> Path:
    """A playbook beside an (empty) PoC script ``poc.py``; line 1 is the text's first line."""
    (tmp_path / "poc.py").write_text("")
    path = tmp_path / "campaign.yml"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


HEAD = "name: t\npoc: {script: poc.py}\nattempts: 6\n"  # lines 1-3
CELLS = "matrix:\n  - name: default\n  - name: lgc-2800\n    graphics_clocks: [180, 2800]\n"  # 4 lines


def load(tmp_path: Path, body: str) -> Playbook:
    return load_playbook(write(tmp_path, HEAD + body))


# --- good values load ------------------------------------------------------------------


def test_without_the_new_keys_the_first_cell_is_the_reference_and_nothing_stops_early(tmp_path: Path) -> None:
    book = load(tmp_path, CELLS)
    assert (book.reference, book.reference_cell.name) == ("default", "default")
    assert book.reproductions == (Outcome.WEDGE, Outcome.REBOOT)  # a watchdog turns a lock into a reboot
    assert (book.at_risk_phase, book.max_excluded_share, book.stop) == (None, 0.2, StopRule())
    assert [c.stop for c in book.cells] == [None, None]


def test_reference_names_the_cell_every_other_is_compared_with(tmp_path: Path) -> None:
    book = load(tmp_path, "reference: lgc-2800\n" + CELLS)
    assert (book.reference, book.reference_cell.index) == ("lgc-2800", 1)


def test_judging_settings_reach_the_playbooks_judging(tmp_path: Path) -> None:
    book = load(tmp_path, "reproductions: [wedge]\nat_risk_phase: cuda_graph_capture\nmax_excluded_share: 0.5\n"
                + CELLS)
    judging = book.judging
    assert (judging.reproductions, judging.at_risk_phase, judging.max_excluded_share) == (
        (Outcome.WEDGE,), Phase.CUDA_GRAPH_CAPTURE, 0.5)
    assert load(tmp_path, "max_excluded_share: 1\n" + CELLS).max_excluded_share == 1.0


def test_fixed_ratio_and_early_reproductions_reach_the_judging_and_default_to_the_simulations_choice(
        tmp_path: Path) -> None:
    assert (load(tmp_path, CELLS).judging.fixed_ratio, load(tmp_path, CELLS).judging.early_reproductions) == (
        0.2, EarlyReproductions.COUNT)
    judging = load(tmp_path, "fixed_ratio: 0.1\nearly_reproductions: exclude\n" + CELLS).judging
    assert (judging.fixed_ratio, judging.early_reproductions) == (0.1, EarlyReproductions.EXCLUDE)
    assert Judging.from_json(judging.to_json()) == judging


@pytest.mark.parametrize(
    ("stop", "rule"),
    [
        ("{rule: fixed_n}", StopRule()),
        ("{rule: first_reproduction}", StopRule(StopKind.FIRST_REPRODUCTION, confidence=0.95)),
        ("{rule: first_reproduction, confidence: 0.9}", StopRule(StopKind.FIRST_REPRODUCTION, confidence=0.9)),
        ("{rule: sprt, p0: 0.3, p1: 0.03}", StopRule(StopKind.SPRT, p0=0.3, p1=0.03, alpha=0.05, beta=0.2)),
        ("{rule: sprt, p0: 0.3, p1: 0, alpha: 0.1, beta: 0.1}",
         StopRule(StopKind.SPRT, p0=0.3, p1=0.0, alpha=0.1, beta=0.1)),
    ],
)
def test_a_campaign_wide_stop_rule_applies_to_every_cell_but_the_reference(
        tmp_path: Path, stop: str, rule: StopRule) -> None:
    book = load(tmp_path, f"stop: {stop}\n" + CELLS)
    assert book.stop == rule
    default, lgc = book.cells
    assert (book.stop_rule(default), book.stop_rule(lgc)) == (StopRule(), rule)


def test_a_cells_own_stop_rule_wins_over_the_campaign_wide_one_and_is_no_factor(tmp_path: Path) -> None:
    book = load(tmp_path, "stop: {rule: first_reproduction}\n" + CELLS
                + "    stop: {rule: sprt, p0: 0.5, p1: 0.05}\n  - name: pl-350\n    power_limit: 350\n")
    default, lgc, pl = book.cells
    assert lgc.stop == StopRule(StopKind.SPRT, p0=0.5, p1=0.05)
    assert book.stop_rule(lgc) is lgc.stop
    assert book.stop_rule(pl) == StopRule(StopKind.FIRST_REPRODUCTION)
    assert "stop" not in lgc.factors  # how long a cell runs is not what it runs: cell identity ignores it


# --- every bad value is one error at file:line:field -------------------------------------------


@pytest.mark.parametrize(
    ("body", "where", "words"),
    [
        ("reference: defualt\n" + CELLS, "4:reference", "did you mean 'default'?"),
        ("reference: [default]\n" + CELLS, "4:reference", "must name a cell"),
        ("refrence: default\n" + CELLS, "4:refrence", "did you mean 'reference'?"),
        ("at_risk_phase: cuda_graph\n" + CELLS, "4:at_risk_phase", "did you mean 'cuda_graph_capture'?"),
        ("at_risk_phase: 3\n" + CELLS, "4:at_risk_phase", "must be one of engine_init"),
        ("max_excluded_share: 0\n" + CELLS, "4:max_excluded_share", "(0, 1]"),
        ("max_excluded_share: 1.5\n" + CELLS, "4:max_excluded_share", "(0, 1]"),
        ("max_excluded_share: '20%'\n" + CELLS, "4:max_excluded_share", "(0, 1]"),
        ("max_excluded_share: true\n" + CELLS, "4:max_excluded_share", "(0, 1]"),
        ("max_exclude_share: 0.1\n" + CELLS, "4:max_exclude_share", "did you mean 'max_excluded_share'?"),
        ("reproductions: [wedge, reboots]\n" + CELLS, "4:reproductions[1]", "did you mean 'reboot'?"),
        ("reproductions: []\n" + CELLS, "4:reproductions", "non-empty"),
        ("stop: sprt\n" + CELLS, "4:stop", "did you mean {rule: sprt}?"),
        ("stop: [sprt]\n" + CELLS, "4:stop", "must be a mapping"),
        ("stop: {rule: sprtt, p0: 0.3, p1: 0.03}\n" + CELLS, "4:stop.rule", "did you mean 'sprt'?"),
        ("stop: {rule: first_reproducton}\n" + CELLS, "4:stop.rule", "did you mean 'first_reproduction'?"),
        ("stop: {p0: 0.3, p1: 0.03}\n" + CELLS, "4:stop.rule", "'rule' is required"),
        ("stop:\n  rule: sprt\n  p1: 0.03\n" + CELLS, "4:stop.p0", "needs 'p0'"),
        ("stop:\n  rule: sprt\n  p0: 0.3\n" + CELLS, "4:stop.p1", "needs 'p1'"),
        ("stop:\n  rule: sprt\n  p0: 0.03\n  p1: 0.3\n" + CELLS, "7:stop.p1", "must be below p0"),
        ("stop:\n  rule: sprt\n  p0: 0.3\n  p1: 0.3\n" + CELLS, "7:stop.p1", "must be below p0"),
        ("stop: {rule: sprt, p0: 1.5, p1: 0.03}\n" + CELLS, "4:stop.p0", "[0, 1]"),
        ("stop: {rule: sprt, p0: 0.3, p1: -0.1}\n" + CELLS, "4:stop.p1", "[0, 1]"),
        ("stop: {rule: sprt, p0: '30%', p1: 0.03}\n" + CELLS, "4:stop.p0", "[0, 1]"),
        ("stop:\n  rule: sprt\n  p0: 0.3\n  p1: 0.03\n  alpha: 0\n" + CELLS, "8:stop.alpha", "(0, 1)"),
        ("stop:\n  rule: sprt\n  p0: 0.3\n  p1: 0.03\n  beta: 1\n" + CELLS, "8:stop.beta", "(0, 1)"),
        ("stop:\n  rule: sprt\n  p0: 0.3\n  p1: 0.03\n  alpha: 0.6\n  beta: 0.5\n" + CELLS, "9:stop.beta",
         "alpha + beta"),
        ("stop: {rule: sprt, p0: 0.3, p1: 0.03, confidence: 0.9}\n" + CELLS, "4:stop.confidence",
         "does not apply to rule sprt"),
        ("stop: {rule: sprt, p0: 0.3, p1: 0.03, aplha: 0.1}\n" + CELLS, "4:stop.aplha", "did you mean 'alpha'?"),
        ("stop: {rule: first_reproduction, confidence: 1}\n" + CELLS, "4:stop.confidence", "(0, 1)"),
        ("stop: {rule: first_reproduction, p0: 0.3}\n" + CELLS, "4:stop.p0", "does not apply"),
        ("stop: {rule: fixed_n, beta: 0.1}\n" + CELLS, "4:stop.beta", "it reads nothing else"),
        ("stop: {rule: sprt, p0: 0.3, p1: 0.29}\n" + CELLS, "4:stop.p1", "no design"),
        ("fixed_ratio: 1\n" + CELLS, "4:fixed_ratio", "a fraction in (0, 1)"),
        ("fixed_ratio: '1/3'\n" + CELLS, "4:fixed_ratio", "a fraction in (0, 1)"),
        ("early_reproductions: exclud\n" + CELLS, "4:early_reproductions", "did you mean 'exclude'?"),
        (CELLS + "    stop: {rule: sprt, p0: 0.3, p1: 0.5}\n", "8:matrix[1].stop.p1", "must be below p0"),
        (CELLS + "    stop:\n      rule: sprt\n", "8:matrix[1].stop.p0", "needs 'p0'"),
        (CELLS + "    stopp: {rule: sprt}\n", "8:matrix[1].stopp", "did you mean 'stop'?"),
        ("matrix:\n  - name: default\n    stop: {rule: first_reproduction}\n  - name: b\n", "6:matrix[0].stop",
         "the reference cell never stops early"),
        ("reference: b\nmatrix:\n  - name: a\n  - name: b\n    stop: {rule: first_reproduction}\n",
         "8:matrix[1].stop", "the reference cell never stops early"),
        ("defaults:\n  stop: {rule: first_reproduction}\n" + CELLS, "5:defaults.stop", "not a factor"),
    ],
)
def test_a_bad_verdict_or_stop_setting_is_one_error_at_its_file_line_and_field(
        tmp_path: Path, body: str, where: str, words: str) -> None:
    path = write(tmp_path, HEAD + body)
    with pytest.raises(PlaybookError) as caught:
        load_playbook(path)
    assert str(caught.value).startswith(f"{path}:{where}: ")
    assert words in caught.value.reason
