"""The command driver against shell commands. (The pdudaemon driver against a real pdudaemon:
tests/fleet/test_power_pdudaemon.py.)"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from reprofleet.errors import PowerError
from reprofleet.model import CredentialRef, PowerPort, frozen_mapping
from reprofleet.power import PowerLog, PowerState, driver_for
from reprofleet.power.base import PowerUnansweredError


def secret_checker(folder: Path) -> Path:
    """A tool that reads the secret where the driver puts it (its environment), as a real one would."""
    tool = folder / "check-secret"
    tool.write_text('#!/bin/sh\n[ "$REPROFLEET_POWER_SECRET" = cmd-pw-0b7 ]\n')
    tool.chmod(0o700)
    return tool


def command_port(switch: Path, **options: Any) -> PowerPort:
    write = "printf '%s\\n' {state} > " + str(switch)
    return PowerPort("command", "pdu-local", "3", credentials=CredentialRef("env", "RF_TEST_CMD_SECRET"),
                     options=frozen_mapping({
                         "on_command": f"{secret_checker(switch.parent)} && {write.format(state='on')}",
                         "off_command": write.format(state="off"),
                         "status_command": f"cat {switch}", "poll_s": 0.02, "settle_s": 1.0, **options}))


def test_command_driver_runs_the_users_commands_with_the_secret_in_the_environment(
        tmp_path: Path, power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_TEST_CMD_SECRET", "cmd-pw-0b7")
    switch = tmp_path / "power"
    switch.write_text("on\n")
    driver = driver_for(command_port(switch), "ws01", power_log)
    assert driver.off() is PowerState.OFF and switch.read_text() == "off\n"
    assert driver.cycle(0.05) is PowerState.ON and switch.read_text() == "on\n"
    assert "cmd-pw-0b7" not in power_log.path.read_text()  # type: ignore[union-attr]


def test_command_driver_exit_code_status_and_failing_commands(tmp_path: Path, power_log: PowerLog,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_TEST_CMD_SECRET", "wrong")
    switch = tmp_path / "power"
    switch.write_text("off\n")
    by_exit = driver_for(command_port(switch, status_command=f"grep -q on {switch} || exit 2", status_from="exit_code",
                                      tries=2), "ws01", power_log)
    assert by_exit.status() is PowerState.OFF
    with pytest.raises(PowerError, match=r"on command exited 1.*gave up after 2 tries"):
        by_exit.on()  # the on command checks the secret, which is wrong here
    hung = driver_for(command_port(switch, off_command="sleep 30", timeout_s=0.2, tries=1), "ws01", power_log)
    started = time.monotonic()
    with pytest.raises(PowerError, match="did not finish within 0.2s"):
        hung.off()
    assert time.monotonic() - started < 5.0


@pytest.mark.parametrize("status_from", ["exit_code", "output"])
def test_a_status_command_that_exits_1_is_no_answer_never_off(tmp_path: Path, power_log: PowerLog, status_from: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A fence agent's exit 1: it could not reach the device. Read as OFF, a campaign would
    take a live host's outlet for off and the partition guard the device for answering."""
    monkeypatch.setenv("RF_TEST_CMD_SECRET", "cmd-pw-0b7")
    switch = tmp_path / "power"
    switch.write_text("on\n")
    unreachable = "echo 'Failed: Unable to obtain correct plug status or plug is not available' >&2; echo off; exit 1"
    driver = driver_for(command_port(switch, status_command=unreachable, status_from=status_from, tries=2),
                        "ws01", power_log)
    with pytest.raises(PowerUnansweredError, match="exited 1: it could not tell"):
        driver.status()


def test_a_status_command_that_exits_2_is_off_and_says_so_in_either_mode(tmp_path: Path, power_log: PowerLog,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_TEST_CMD_SECRET", "cmd-pw-0b7")
    switch = tmp_path / "power"
    for status_from in ("exit_code", "output"):
        driver = driver_for(command_port(switch, status_command="echo 'Status: OFF'; exit 2", status_from=status_from),
                            "ws01", power_log)
        assert driver.status() is PowerState.OFF
    contradicts = driver_for(command_port(switch, status_command="echo on; exit 2", tries=1), "ws01", power_log)
    with pytest.raises(PowerError, match="exited 2 [(]off[)] but printed on"):
        contradicts.status()
