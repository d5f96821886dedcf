"""The host agent's `host-debug`: the lockup-to-panic sysctls set, read back, and put back
to the host's own values of this boot (collectors/host_debug.py, on a fake /proc/sys)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import paths

COLLECTORS = paths.REPO / "collectors"
sys.path.insert(0, str(COLLECTORS))
import attempt_state  # noqa: E402
import host_debug  # noqa: E402
from agent_protocol import UsageError  # noqa: E402

OWN = {"nmi_watchdog": 0, "softlockup_panic": 0, "hardlockup_panic": 0, "panic": 0, "panic_on_oops": 0,
       "softlockup_all_cpu_backtrace": 0}
PANICS = {"softlockup_panic": 1, "hardlockup_panic": 1, "nmi_watchdog": 1, "panic": 10}


@pytest.fixture
def proc_sys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    kernel = tmp_path / "proc-sys" / "kernel"
    kernel.mkdir(parents=True)
    for name, value in OWN.items():
        (kernel / name).write_text(f"{value}\n")
    monkeypatch.setenv(host_debug.PROC_SYS_ENV, str(tmp_path / "proc-sys"))
    monkeypatch.setattr(attempt_state, "read_boot_id", lambda: "boot-1")
    return kernel


def values(kernel: Path) -> dict[str, int]:
    return {p.name: int(p.read_text()) for p in kernel.iterdir()}


def test_apply_sets_every_sysctl_reads_it_back_and_saves_the_hosts_own_values_once(
        proc_sys: Path, tmp_path: Path) -> None:
    report = host_debug.apply(str(tmp_path / "state"), PANICS)
    assert report["ok"] and report["errors"] == []
    assert values(proc_sys) == {**OWN, **PANICS}
    assert report["values"] == {**OWN, **PANICS}
    assert [w["name"] for w in report["writes"]] == ["nmi_watchdog", "softlockup_panic", "hardlockup_panic", "panic"]
    again = host_debug.apply(str(tmp_path / "state"), {**PANICS, "panic": 3})
    assert again["baseline"] == OWN  # not our own first values: the host's
    assert [w["name"] for w in again["writes"]] == ["panic"]


def test_a_cell_without_host_debug_after_one_with_it_runs_with_the_hosts_own_values(
        proc_sys: Path, tmp_path: Path) -> None:
    host_debug.apply(str(tmp_path / "state"), PANICS)
    report = host_debug.apply(str(tmp_path / "state"), {})
    assert report["ok"] and values(proc_sys) == OWN


def test_restore_puts_back_the_hosts_own_values_and_forgets_the_baseline(proc_sys: Path, tmp_path: Path) -> None:
    (proc_sys / "panic").write_text("-1\n")  # the host's own: reboot at once
    host_debug.apply(str(tmp_path / "state"), PANICS)
    report = host_debug.restore(str(tmp_path / "state"))
    assert report["ok"] and values(proc_sys) == {**OWN, "panic": -1}
    assert not (tmp_path / "state" / "host_debug" / "baseline.json").exists()
    assert "nothing applied" in host_debug.restore(str(tmp_path / "state"))["notes"][-1]


def test_a_baseline_from_an_earlier_boot_is_never_written_back(
        proc_sys: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host_debug.apply(str(tmp_path / "state"), PANICS)
    # the panic rebooted the host: its own values are back, and the administrator changed one since
    for name, value in OWN.items():
        (proc_sys / name).write_text(f"{value}\n")
    (proc_sys / "panic_on_oops").write_text("1\n")
    monkeypatch.setattr(attempt_state, "read_boot_id", lambda: "boot-2")
    report = host_debug.restore(str(tmp_path / "state"))
    assert report["ok"] and report["writes"] == []
    assert values(proc_sys)["panic_on_oops"] == 1
    assert not (tmp_path / "state" / "host_debug" / "baseline.json").exists()


def test_a_sysctl_this_kernel_lacks_fails_the_apply_before_anything_is_written(
        proc_sys: Path, tmp_path: Path) -> None:
    (proc_sys / "hardlockup_panic").unlink()
    report = host_debug.apply(str(tmp_path / "state"), PANICS)
    assert not report["ok"] and report["writes"] == []
    assert "kernel.hardlockup_panic does not exist here" in report["errors"][0]
    assert "CONFIG_HARDLOCKUP_DETECTOR" in report["errors"][0]
    assert values(proc_sys) == {k: v for k, v in OWN.items() if k != "hardlockup_panic"}


def test_a_value_the_kernel_does_not_keep_fails_clearly(
        proc_sys: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = host_debug.read_one
    monkeypatch.setattr(host_debug, "read_one",  # a VM without perf NMIs: nmi_watchdog stays 0
                        lambda name: (0, None) if name == "nmi_watchdog" else real(name))
    report = host_debug.apply(str(tmp_path / "state"), PANICS)
    assert not report["ok"]
    assert report["errors"] == ["kernel.nmi_watchdog = 1 did not hold: it reads back 0"]


@pytest.mark.parametrize("text, why", [
    ('{"softlockup_panik": 1}', "unknown sysctls"),
    ('{"panic": -1}', "whole number >= 0"),
    ('{"panic": "10"}', "whole number >= 0"),
    ("[1]", "must be an object"),
])
def test_bad_settings_are_usage_errors(text: str, why: str) -> None:
    with pytest.raises(UsageError, match=why):
        host_debug.parse_settings(text)


def test_the_agent_subcommand_prints_one_host_debug_line_and_exits_1_when_not_ok(
        proc_sys: Path, tmp_path: Path) -> None:
    def agent(*args: str) -> tuple[int, dict[str, Any]]:
        result = subprocess.run([sys.executable, str(COLLECTORS / "agent.py"), "--state-dir", str(tmp_path / "s"),
                                 "host-debug", *args], capture_output=True, text=True, timeout=30)
        (line,) = result.stdout.splitlines()
        return result.returncode, json.loads(line)

    rc, line = agent("apply", "--json", json.dumps({"softlockup_panic": 1}))
    assert rc == 0 and line["k"] == "host_debug" and line["values"]["softlockup_panic"] == 1
    rc, line = agent("read")
    assert rc == 0 and line["baseline"] == OWN and line["values"]["softlockup_panic"] == 1
    rc, line = agent("restore")
    assert rc == 0 and values(proc_sys) == OWN
    (proc_sys / "softlockup_panic").unlink()
    rc, line = agent("apply", "--json", json.dumps({"softlockup_panic": 1}))
    assert rc == 1 and not line["ok"]


def test_a_panic_record_systemd_pstore_archived_in_this_boot_is_read_and_an_older_one_is_not(
        tmp_path: Path) -> None:
    import os
    import time

    import postboot

    fresh = tmp_path / "archive" / "1764540000000000"
    stale = tmp_path / "archive" / "1700000000000000"
    for folder in (fresh, stale):
        folder.mkdir(parents=True)
        (folder / "dmesg-efi-176454000001001").write_text(
            "Panic#1 Part1\n<0>[  812.4] Kernel panic - not syncing: softlockup: hung tasks\n")
    os.utime(stale, (time.time() - 10 * 365 * 86400,) * 2)  # archived long before this boot
    [record] = postboot.archived_pstore(str(tmp_path / "archive"))
    assert record["file"].startswith(str(fresh))
    assert ["panic" in f["tags"] for f in record["findings"]] == [True]
    assert postboot.archived_pstore(str(tmp_path / "none")) == []
