"""``invoke plan --playbook`` of a search or bisection: true curves in, the simulation's figures out.

The simulation (``campaign.search_sim``, issue 23's model) is replaced at its seam
(``search_estimate._model``) by a recorder that returns a plan of its own shape, so what is
pinned is the wiring: the truths the user wrote reach it as P per level, the spec is the
playbook's, and every figure it returns is printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from invoke import Program

from reprofleet.campaign import search_estimate
from reprofleet.campaign.search_sim import BisectPlan, MethodFigures, SearchPlan
from reprofleet.cli.tasks import ns
from reprofleet.playbook import load_playbook
from reprofleet.stats.search_contract import BisectSpec, SearchSpec
from tests.support.search_playbooks import EXAMPLE, write


def _figures(method: str, attempts: float, cycles: float) -> MethodFigures:
    return MethodFigures(method, attempts, attempts * 1.5, cycles, cycles * 2, 0.97, 0.91)


def _recorder(calls: list[tuple[Any, ...]]) -> Any:
    def simulate(*args: Any, **kwargs: Any) -> Any:
        calls.append((*args, kwargs))
        if isinstance(args[0], BisectSpec):
            return BisectPlan(_figures("ours", 41.5, 3.25), _figures("fixed", 80.0, 6.0), 14, False, 2, 12.0)
        return SearchPlan(_figures("ours", 41.5, 3.25), _figures("grid", 120.0, 9.0), _figures("fixed", 80.0, 6.0),
                          59, (), 3600.0)
    return simulate


def _plan(*argv: str) -> None:
    Program(namespace=ns, name="reprofleet", binary="reprofleet").run(["reprofleet", "plan", *argv], exit=False)


def test_an_onset_truth_becomes_p_per_level_and_every_design_is_printed(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(search_estimate, "_model", lambda name: _recorder(calls))
    _plan("--playbook", str(EXAMPLE), "--truth", "onset=2600,slope=0.3,floor=0.01", "--truth", "p=0/0/0/0/0.5",
          "--campaigns", "50")
    out = capsys.readouterr().out
    (spec, p, runs, seed, kwargs), (_, p2, *_rest) = calls
    assert isinstance(spec, SearchSpec) and spec.levels == 5 and spec.epsilon == 0.05 and spec.budget_attempts == 200
    assert p == {"host": pytest.approx((0.01, 0.01, 0.31, 0.61, 0.91))} and p2 == {"host": (0, 0, 0, 0, 0.5)}
    assert runs == 50
    assert "truth: onset 2600 MHz, +0.3 per level from it, false-wedge floor 0.01" in out
    rows = {line.strip().split("  ")[0]: " ".join(line.split()) for line in out.splitlines() if " / " in line}
    assert rows["ours (monotone model, value of information)"].endswith("42 / 62 3.2 / 6 97.0% 91.0%")
    assert rows["full grid (each level to its own bound)"].endswith("120 / 180 9.0 / 18 97.0% 91.0%")
    assert rows["fixed-run rule (59 runs a point, any wedge is bad)"].endswith("80 / 120 6.0 / 12 97.0% 91.0%")


def test_without_a_truth_the_default_curve_is_stated(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(search_estimate, "_model", lambda name: _recorder(calls))
    _plan("--playbook", str(EXAMPLE))
    assert "no --truth given: simulating the default curve (onset 2600 MHz" in capsys.readouterr().out
    assert calls[0][1]["host"] == pytest.approx((0.01, 0.01, 0.26, 0.51, 0.76))


def test_with_an_inventory_its_hosts_probe_in_parallel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(search_estimate, "_model", lambda name: _recorder(calls))
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    ws01: {ansible_host: 10.0.0.1}\n    ws02: {ansible_host: 10.0.0.2}\n")
    _plan("--hosts", str(inventory), "--playbook", str(EXAMPLE), "--truth", "onset=2800")
    assert calls[0][-1] == {"hosts_parallel": 2} and "2 hosts in parallel" in capsys.readouterr().out
    assert sorted(calls[0][1]) == ["ws01", "ws02"]  # every host on the stated curve


def test_a_bisection_truth_names_the_first_good_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(search_estimate, "_model", lambda name: (calls.append((name,)), _recorder(calls))[1])
    path = write(tmp_path, "bisect: {factor: vars.vllm, versions: ['0.24.0', '0.25.1', '0.26.0', '0.27.0']}\n")
    _plan("--playbook", str(path), "--truth", "change=0.26.0,bad=0.5")
    assert calls[0] == ("plan_bisect",)
    spec, p, hosts, runs, seed, _ = calls[1]
    assert isinstance(spec, BisectSpec) and p == (0.5, 0.5, 0.0, 0.0) and hosts == 1


@pytest.mark.parametrize(("truth", "words"), [
    ("onset", "NAME=VALUE"), ("slope=2", "rate in [0, 1]"), ("p=0/1", "2 rates for 5 levels"),
    ("change=0.26.0", "onset=, slope=, floor= or p="),
])
def test_a_bad_truth_is_one_line(truth: str, words: str) -> None:
    book = load_playbook(EXAMPLE)
    assert book.search is not None
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        search_estimate.parse_truth(truth, book.search)
