"""Command lines a new user typed: sim.up -c FILE keeps every host; power HOST ACTION reads naturally."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from invoke import Program

from reprofleet.sim import simctl
from reprofleet.cli.tasks import ns


def _run(*argv: str) -> None:
    Program(namespace=ns, name="reprofleet", binary="reprofleet").run(["reprofleet", *argv], exit=False)


def test_sim_up_with_a_config_keeps_every_host_unless_a_count_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[Any, ...]] = []

    def up(hosts: int, config: Any, sim_dir: Path) -> Any:
        asked.append((hosts, config))
        return SimpleNamespace(hosts=[], inventory_path="inv.yml")

    monkeypatch.setattr(simctl, "up", up)
    _run("sim.up", "-c", "fleet.yml")
    _run("sim.up", "-c", "fleet.yml", "--count", "2")
    _run("sim.up")
    assert asked == [(0, "fleet.yml"), (2, "fleet.yml"), (0, None)]  # 0: all of FILE, or the 3 demo hosts


def test_power_reads_host_then_action_and_names_the_missing_inventory(monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import reprofleet.campaign.power_ops as power_control

    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(power_control, "power_action",
                        lambda hosts, host, action, root, dwell: calls.append((hosts, host, action)) or
                        SimpleNamespace(value="on"))
    _run("power", "ws2", "status", "--hosts", "inv.yml")
    _run("power", "--host", "ws10", "--action", "status", "--hosts", "inv.yml")
    assert calls == [("inv.yml", "ws2", "status"), ("inv.yml", "ws10", "status")]
    with pytest.raises(SystemExit):
        Program(namespace=ns, name="reprofleet", binary="reprofleet").run(["reprofleet", "power", "ws2", "status"])
    assert "invoke power HOST ACTION --hosts INVENTORY" in capsys.readouterr().err


def test_report_and_compare_take_any_number_of_paths_as_words_around_their_flags(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import reprofleet.report.compare as compare

    seen: list[tuple[list[str], str]] = []

    def sides(paths: list[Path], by: Any, reference: Any, groups: Any) -> list[Any]:
        seen.append(([str(p) for p in paths], by.value))
        return []

    monkeypatch.setattr(compare, "build_sides", sides)
    monkeypatch.setattr(compare, "compare_table", lambda s: "")
    _run("compare", "a", "b", "c")
    _run("compare", "--by", "controller", "a", "demo", "--reference", "x", "b")  # a task's name is a path here
    _run("compare", "--paths", "a,b", "c")
    assert seen == [(["a", "b", "c"], "path"), (["a", "demo", "b"], "controller"), (["a", "b", "c"], "path")]
