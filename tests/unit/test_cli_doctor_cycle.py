"""``reprofleet doctor --cycle`` at the front door: a person's yes first, then JSON lines that
match docs/schema/doctor.schema.json and a private doctor folder with one line per host.

The lab behind it is tests/support/cycle_lab_fake.py in virtual time (the decisions are
pinned in tests/seam/test_seam_doctor_cycle.py); here: what the task asks, prints, writes and
exits with.
"""

from __future__ import annotations

import builtins
import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from reprofleet.campaign import cycle_lab
from reprofleet.clock import VirtualClock
from tests.support.cli_inprocess import run_task
from tests.support.cycle_lab_fake import FakeLab, Machine
from tests.support.paths import REPO

BOOK = str(REPO / "playbooks" / "demo.yml")  # timeouts.boot: 60


def _inventory(tmp_path: Path) -> str:
    path = tmp_path / "hosts.yml"
    path.write_text("all:\n  hosts:\n"
                    "    ws1: {ansible_host: 192.0.2.11, pdu: {driver: shelly, address: 192.0.2.101, outlet: 0}}\n"
                    "    ws2: {ansible_host: 192.0.2.12, pdu: {driver: shelly, address: 192.0.2.102, outlet: 0}}\n")
    return str(path)


@pytest.fixture
def lab(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[FakeLab]:
    """The lab ``run_cycle`` builds, replaced by the fake (ws2's BIOS stays off); the list holds
    it once built (empty: nothing was ever going to be switched)."""
    clock = VirtualClock()
    built: list[FakeLab] = []

    def fake(hosts: Any, transport: Any, folder: Path, reports: Path) -> FakeLab:
        machines = {"ws1": Machine("192.0.2.101", boot_s=40.0), "ws2": Machine("192.0.2.102", bios_stays_off=True)}
        built.append(FakeLab(clock, machines, outlet_of=lambda host: str(host.pdu.address)))
        return built[-1]

    monkeypatch.setattr(cycle_lab, "SshCycleLab", fake)
    monkeypatch.setattr(cycle_lab, "SystemClock", lambda: clock)
    monkeypatch.chdir(tmp_path)
    return built


def test_without_a_terminal_to_ask_on_nothing_is_switched_and_the_exit_status_is_2(
        lab: list[FakeLab], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_task(capsys, "doctor", "-i", _inventory(tmp_path), "-p", BOOK, "--cycle")
    assert code == 2 and "no terminal to ask on: pass --yes" in err
    assert lab == [] and out == ""


def test_a_person_who_answers_no_gets_nothing_done_and_exit_status_2(
        lab: list[FakeLab], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(builtins, "input", lambda question: asked.append(question) or "n")
    code, _, err = run_task(capsys, "doctor", "-i", _inventory(tmp_path), "-p", BOOK, "--cycle")
    assert code == 2 and "nothing done" in err and lab == []
    assert asked and asked[0].startswith("power-cycle ws1, ws2 (one at a time")


def test_yes_cycles_each_host_prints_schema_lines_and_records_them_in_a_private_doctor_folder(
        lab: list[FakeLab], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_task(capsys, "doctor", "-i", _inventory(tmp_path), "-p", BOOK, "--cycle", "--yes", "-j")
    assert code == 3  # ws2 stayed off: not proven
    lines = [json.loads(line) for line in out.splitlines()]
    validator = Draft202012Validator(json.loads((REPO / "docs" / "schema" / "doctor.schema.json").read_text()))
    assert all(not list(validator.iter_errors(line)) for line in lines)
    ws1, ws2 = lines
    assert ws1["ok"] and ws1["off_to_sshd_s"] == 50.0 and ws1["suggested_boot_s"] == 120
    assert not ws2["ok"] and any(c["item"] == "BIOS power-on" and c["status"] == "missing" for c in ws2["checks"])
    assert "suggested playbook setting: timeouts: {boot: 120}" in err
    (folder,) = (tmp_path / "reports" / "doctor").iterdir()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    written = folder / "cycles.jsonl"
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert [json.loads(line) for line in written.read_text().splitlines()] == lines
    assert lab[0].switches == [("ws1", "off"), ("ws1", "on"), ("ws2", "off"), ("ws2", "on")]


def test_yes_without_cycle_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_task(capsys, "doctor", "-i", _inventory(tmp_path), "--yes")
    assert code == 2 and "--yes goes with --cycle" in err
