"""`postboot`: findings in the previous boot's kernel log and in pstore."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support import agent_harness as h
from tests.support import paths

postboot = h.collector("postboot")
FIXTURES = paths.FIXTURES / "agent" / "postboot"
PREVIOUS_BOOT = (FIXTURES / "prev-boot-kernel.log").read_text().splitlines()


def fake_journalctl(bin_dir: Path, log: Path | None, message: str = "") -> Path:
    """A journalctl that prints `log` for ``-k -b -1``, or fails with `message`."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "journalctl"
    body = f'cat "{log}"' if log else f'echo "{message}" >&2; exit 1'
    script.write_text('#!/bin/sh\ncase "$*" in *"-k -b -1"*) ;; *) echo "unexpected: $*" >&2; exit 2;; esac\n'
                      f"{body}\n")
    script.chmod(0o755)
    return bin_dir


def test_the_extractor_keeps_xid_nvrm_aer_and_hung_task_lines_and_nothing_else() -> None:
    findings = postboot.extract_findings(PREVIOUS_BOOT)
    assert [(f["tags"], f["line"].split(" kernel: ", 1)[1]) for f in findings] == [
        (["aer"], "pcieport 0000:00:01.1: AER: Corrected error message received from 0000:01:00.0"),
        (["aer"], "nvidia 0000:01:00.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Transmitter ID)"),
        (["xid", "nvrm"], "NVRM: Xid (PCI:0000:01:00): 79, pid=2241, name=python3, GPU has fallen off the bus."),
        (["nvrm"], "NVRM: GPU 0000:01:00.0: GPU has fallen off the bus."),
        (["hung_task"], "INFO: task python3:2241 blocked for more than 122 seconds."),
        (["hung_task"], '"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.'),
    ]


def test_a_boot_like_the_seeds_has_no_findings_at_all() -> None:
    """The seed's freeze left no Xid, NVRM error, AER, MCE or watchdog line."""
    assert postboot.extract_findings(PREVIOUS_BOOT[:9]) == []


def test_findings_are_bounded() -> None:
    assert len(postboot.extract_findings(["NVRM: Xid (PCI:0000:01:00): 13, x"] * 500, limit=7)) == 7


def test_postboot_reads_the_previous_boot_and_pstore(tmp_path: Path) -> None:
    bin_dir = fake_journalctl(tmp_path / "bin", FIXTURES / "prev-boot-kernel.log")
    env = h.agent_env({"PATH": f"{bin_dir}:/usr/bin:/bin"})
    rc, lines, _ = h.run_agent(tmp_path, "postboot", "--pstore", str(FIXTURES / "pstore"), env=env)
    report = lines[0]
    assert rc == 0 and report["k"] == "postboot" and report["boot_id"]
    assert isinstance(report["journal_persistent"], bool)
    previous = report["previous_boot"]
    assert previous["available"] is True and previous["lines"] == len(PREVIOUS_BOOT)
    assert previous["findings"] == postboot.extract_findings(PREVIOUS_BOOT)
    assert previous["tail"] == PREVIOUS_BOOT[-50:]
    [ramoops] = report["pstore"]
    assert ramoops["file"].endswith("dmesg-ramoops-0")
    assert [f["tags"] for f in ramoops["findings"]] == [["watchdog"], ["oops"], ["oops"], ["oops", "panic"]]


def test_a_previous_boot_the_journal_does_not_have_is_unavailable_with_the_reason(tmp_path: Path) -> None:
    message = "Data from the specified boot (-1) is not available: No such boot ID in journal"
    bin_dir = fake_journalctl(tmp_path / "bin", None, message)
    env = h.agent_env({"PATH": f"{bin_dir}:/usr/bin:/bin"})
    rc, lines, _ = h.run_agent(tmp_path, "postboot", "--pstore", str(tmp_path / "no-pstore"), env=env)
    previous = lines[0]["previous_boot"]
    shutdown = previous.pop("shutdown")  # the whole journal of that boot is not there either
    assert rc == 0 and previous == {"available": False, "reason": message, "lines": 0, "findings": [], "tail": []}
    assert {k: v for k, v in shutdown.items() if k != "reason"} == {"orderly": False, "by": None, "lines": [],
                                                                     "available": False}
    assert lines[0]["pstore"] == []


def journalctl_for_boot(bin_dir: Path, boot: str, log: Path) -> Path:
    """A journalctl that has the kernel log of boot ``boot`` only (``-b -1`` is another boot)."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "journalctl"
    script.write_text('#!/bin/sh\ncase "$*" in\n'
                      f'  *"-k -b {boot} "*) cat "{log}";;\n'
                      f'  *"-b {boot} "*) ;;\n'
                      '  *) echo "Data from the specified boot is not available: $*" >&2; exit 1;;\nesac\n')
    script.chmod(0o755)
    return bin_dir


def test_postboot_reads_the_boot_it_is_asked_about_not_boot_minus_one(tmp_path: Path) -> None:
    """A reboot, then a power cycle: the attempt ran two boots ago, and its boot_id names it."""
    boot = "8c1f7d1e-3a4b-4c5d-9e6f-0a1b2c3d4e5f"
    bin_dir = journalctl_for_boot(tmp_path / "bin", boot.replace("-", ""), FIXTURES / "prev-boot-kernel.log")
    env = h.agent_env({"PATH": f"{bin_dir}:/usr/bin:/bin"})
    rc, lines, _ = h.run_agent(tmp_path, "postboot", "--pstore", str(tmp_path / "none"), "--boot", boot, env=env)
    assert rc == 0 and lines[0]["previous_boot"]["lines"] == len(PREVIOUS_BOOT)


def test_postboot_refuses_a_boot_that_is_not_a_boot_id(tmp_path: Path) -> None:
    rc, lines, err = h.run_agent(tmp_path, "postboot", "--boot", "-1; reboot")
    assert rc != 0 and "--boot must be a boot id" in (err + str(lines))
