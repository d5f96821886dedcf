"""The facts' ``watchdog``, ``panic_sysctls`` and ``kdump_loaded``: what could reset a frozen
host by itself. The host of the first test is the lent H200 VM as captured read-only
(tests/fixtures/real-gpu/health/self-reset.txt): no watchdog device, no kexec, kernel.panic 1."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests.support import agent_harness as h

self_reset = h.collector("self_reset")
H200_SYSCTLS = {"panic": 1, "softlockup_panic": 0, "hardlockup_panic": 0, "nmi_watchdog": 0, "hung_task_panic": 0,
                "panic_on_oops": 0, "watchdog_thresh": 10}


def _host(tmp: Path, sysctls: dict[str, int], watchdogs: dict[str, dict[str, str]] | None = None,
          kexec: str | None = None) -> dict[str, str]:
    sysfs, proc_sys = tmp / "sys", tmp / "proc-sys"
    (sysfs / "class" / "watchdog").mkdir(parents=True)
    (sysfs / "kernel").mkdir()
    if kexec is not None:
        (sysfs / "kernel" / "kexec_crash_loaded").write_text(kexec + "\n")
    for name, attributes in (watchdogs or {}).items():
        folder = sysfs / "class" / "watchdog" / name
        folder.mkdir()
        for attribute, value in attributes.items():
            (folder / attribute).write_text(value + "\n")
    (proc_sys / "kernel").mkdir(parents=True)
    for name, value in sysctls.items():
        (proc_sys / "kernel" / name).write_text(f"{value}\n")
    return h.agent_env({"REPROFLEET_SYSFS": str(sysfs), "REPROFLEET_PROC_SYS": str(proc_sys)})


def _facts(tmp: Path, env: dict[str, str]) -> dict[str, Any]:
    rc, lines, err = h.run_agent(tmp / "state", "facts", env=env)
    assert rc == 0, err
    return lines[0]


def test_the_h200_vm_has_no_watchdog_and_reboots_one_second_after_a_panic(tmp_path: Path) -> None:
    facts = _facts(tmp_path, _host(tmp_path, H200_SYSCTLS))
    assert facts["watchdog"]["armed"] is False and facts["watchdog"]["why"] == "no hardware watchdog device"
    assert facts["watchdog"]["devices"] == []
    assert facts["panic_sysctls"] == {"values": H200_SYSCTLS, "absent": []}
    assert facts["kdump_loaded"] is False  # no kexec_crash_loaded: a kernel without kexec


def test_an_active_watchdog_and_a_loaded_kdump_are_reported(tmp_path: Path) -> None:
    env = _host(tmp_path, {"panic": 0}, kexec="1", watchdogs={
        "watchdog0": {"identity": "iTCO_wdt", "state": "active", "timeout": "30", "nowayout": "0"}})
    facts = _facts(tmp_path, env)
    assert facts["watchdog"]["armed"] is True
    assert facts["watchdog"]["why"] == "watchdog0 (iTCO_wdt) is active, timeout 30 s"
    assert facts["watchdog"]["devices"][0]["timeout_s"] == 30
    assert facts["kdump_loaded"] is True
    # a kernel without the lockup detectors has no such sysctls: it cannot panic that way
    assert facts["panic_sysctls"]["values"]["softlockup_panic"] is None
    assert "softlockup_panic" in facts["panic_sysctls"]["absent"]


def test_a_watchdog_is_judged_from_its_state_systemd_and_the_bmc_driver() -> None:
    judge = self_reset.judge_watchdog
    idle = {"name": "watchdog0", "identity": "sp5100-tco", "state": "inactive"}
    assert judge([idle], 0.0, False, False) == (False, "watchdog0 (sp5100-tco) present but not armed")
    assert judge([idle], 60.0, False, False) == (True, "systemd's RuntimeWatchdogSec is 60 s")
    assert judge([], None, True, False)[0] is None  # ipmi_watchdog: the BMC's timer cannot be read
    assert judge([{"name": "watchdog0", "state": None}], None, False, False)[0] is None
    assert judge([], None, False, True)[0] is None  # /dev/watchdog without the class
    assert judge([], None, False, False) == (False, "no hardware watchdog device")


def test_systemd_time_spans_are_read_in_seconds() -> None:
    parse = self_reset.parse_timespan
    assert [parse(t) for t in ("0", "off", "30s", "1min 30s", "10min", "2h", "500ms", "30000000")] == [
        0.0, 0.0, 30.0, 90.0, 600.0, 7200.0, 0.5, 30.0]
    assert parse("infinity") == float("inf")
    assert parse("soon") is None and parse("3 fortnights") is None
