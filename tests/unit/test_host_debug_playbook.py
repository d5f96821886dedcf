"""`host_debug:` in a playbook: merged over defaults like env, part of a cell's identity only
when set, and every mistake named by file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprofleet.runner import host_debug
from reprofleet.errors import PlaybookError
from reprofleet.model import HostDebug
from reprofleet.playbook import load_playbook

HEAD = "name: t\npoc: {script: poc.py}\nattempts: 2\n"


def book(tmp_path: Path, body: str) -> Path:
    (tmp_path / "poc.py").write_text("print('hi')\n")
    path = tmp_path / "book.yml"
    path.write_text(HEAD + body)
    return path


def test_host_debug_merges_key_by_key_over_the_defaults_and_null_removes_one(tmp_path: Path) -> None:
    playbook = load_playbook(book(tmp_path, (
        "defaults:\n  host_debug: {softlockup_panic: true, panic: 10}\n"
        "matrix:\n"
        "  - name: plain\n    host_debug: {softlockup_panic: null, panic: null}\n"
        "  - name: soft\n"
        "  - name: hard\n    host_debug: {hardlockup_panic: true, panic: 0}\n")))
    plain, soft, hard = playbook.cells
    assert plain.host_debug.is_default and "host_debug" not in plain.factors
    assert soft.host_debug == HostDebug(softlockup_panic=True, panic=10)
    assert hard.host_debug == HostDebug(softlockup_panic=True, hardlockup_panic=True, panic=0)
    assert hard.factors["host_debug"] == {"hardlockup_panic": True, "panic": 0, "softlockup_panic": True}


def test_a_cell_without_host_debug_keeps_the_identity_it_had_before_the_factor_existed(tmp_path: Path) -> None:
    before = load_playbook(book(tmp_path, "matrix:\n  - name: a\n")).cells[0]
    after = load_playbook(book(tmp_path, "matrix:\n  - name: a\n    host_debug: {}\n")).cells[0]
    with_it = load_playbook(book(tmp_path, "matrix:\n  - name: a\n    host_debug: {panic_on_oops: true}\n")).cells[0]
    assert dict(before.factors) == dict(after.factors)
    assert dict(with_it.factors) != dict(before.factors)  # so its cell_id differs: a separate cell


@pytest.mark.parametrize("value, line, field, words", [
    ("{softlockup_panik: true}", 6, "matrix[0].host_debug.softlockup_panik", "did you mean 'softlockup_panic'"),
    ("{softlockup_panic: 1}", 6, "matrix[0].host_debug.softlockup_panic", "true or false"),
    ("{panic: -1}", 6, "matrix[0].host_debug.panic", ">= 0"),
    ("{panic: 2.5}", 6, "matrix[0].host_debug.panic", "whole seconds"),
    ("[softlockup_panic]", 6, "matrix[0].host_debug", "must be a mapping"),
])
def test_a_bad_host_debug_names_file_line_and_field(tmp_path: Path, value: str, line: int, field: str,
                                                    words: str) -> None:
    path = book(tmp_path, f"matrix:\n  - name: a\n    host_debug: {value}\n")
    with pytest.raises(PlaybookError) as caught:
        load_playbook(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}:{field}: "), message
    assert words in message


def test_a_hard_lockup_panic_turns_the_nmi_watchdog_on_too() -> None:
    assert host_debug.sysctls(HostDebug(hardlockup_panic=True, panic=5)) == {
        "hardlockup_panic": 1, "nmi_watchdog": 1, "panic": 5}
    assert host_debug.sysctls(HostDebug(softlockup_panic=False)) == {"softlockup_panic": 0}
    assert host_debug.verify({"nmi_watchdog": 1}, {"nmi_watchdog": 0}) == [
        "kernel.nmi_watchdog: asked 1, the kernel reports 0"]
