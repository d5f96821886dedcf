"""The facts' ``kdump``: whether an NMI from the BMC becomes a vmcore (the crash kernel, the two
NMI sysctls), and the vmcores a previous panic left under /var/crash, read by the real agent
from a host tree of files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.support import agent_harness as h


def _host(tmp: Path, *, kexec: str | None, sysctls: dict[str, int], dumps: dict[str, float] | None = None,
          crash: bool = True) -> dict[str, str]:
    sysfs, proc_sys, crash_dir = tmp / "sys", tmp / "proc-sys", tmp / "crash"
    (sysfs / "kernel").mkdir(parents=True)
    if kexec is not None:
        (sysfs / "kernel" / "kexec_crash_loaded").write_text(kexec + "\n")
    (proc_sys / "kernel").mkdir(parents=True)
    for name, value in sysctls.items():
        (proc_sys / "kernel" / name).write_text(f"{value}\n")
    if crash:
        crash_dir.mkdir()
    for rel, mtime in (dumps or {}).items():
        path = crash_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"KDUMP   ")
        os.utime(path, (mtime, mtime))
    return h.agent_env({"REPROFLEET_SYSFS": str(sysfs), "REPROFLEET_PROC_SYS": str(proc_sys),
                        "REPROFLEET_CRASH_DIR": str(crash_dir)})


def _kdump(tmp: Path, env: dict[str, str]) -> dict[str, Any]:
    rc, lines, err = h.run_agent(tmp / "state", "facts", env=env)
    assert rc == 0, err
    return dict(lines[0]["kdump"])


def test_a_host_ready_for_the_nmi_rung_reports_its_crash_kernel_sysctls_and_vmcores(tmp_path: Path) -> None:
    env = _host(tmp_path, kexec="1", sysctls={"unknown_nmi_panic": 1, "panic_on_unrecovered_nmi": 0}, dumps={
        "202612062350/dump.202612062350": 2000.0,  # kdump-tools (Debian, Ubuntu)
        "127.0.0.1-2026-12-05-10:00:00/vmcore": 1000.0,  # kexec-tools (Fedora, RHEL)
        "202612062350/dmesg.202612062350": 2000.0,  # the kernel log beside it is not a dump
    })
    kdump = _kdump(tmp_path, env)
    assert kdump["crash_kernel_loaded"] is True
    assert kdump["unknown_nmi_panic"] == 1 and kdump["panic_on_unrecovered_nmi"] == 0
    assert [Path(p).relative_to(tmp_path / "crash").as_posix() for p in kdump["vmcores"]] == [
        "127.0.0.1-2026-12-05-10:00:00/vmcore", "202612062350/dump.202612062350"]  # oldest first


def test_a_host_without_kdump_says_so_and_an_absent_crash_folder_is_no_vmcore(tmp_path: Path) -> None:
    kdump = _kdump(tmp_path, _host(tmp_path, kexec=None, sysctls={}, crash=False))
    assert kdump["crash_kernel_loaded"] is False  # a kernel without kexec
    assert kdump["unknown_nmi_panic"] is None and kdump["panic_on_unrecovered_nmi"] is None
    assert kdump["vmcores"] == []
