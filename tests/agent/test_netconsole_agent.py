"""The host agent's `netconsole`: the kernel's netconsole configured through configfs (the
module loaded when absent, the console loglevel raised), read back, and undone to exactly
what was there before (collectors/netconsole.py, on a fake configfs, /proc/sys and modprobe)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import paths

COLLECTORS = paths.REPO / "collectors"
SIM = paths.REPO / "src" / "reprofleet" / "sim"
sys.path.insert(0, str(COLLECTORS))
import attempt_state  # noqa: E402
import netconsole  # noqa: E402
from agent_protocol import UsageError  # noqa: E402

WANTED = {"port": 6666, "dev": None, "target": "127.0.0.1", "extended": True}


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """configfs without the module, printk at Ubuntu's default, a modprobe that loads it."""
    (tmp_path / "configfs").mkdir()
    kernel = tmp_path / "proc-sys" / "kernel"
    kernel.mkdir(parents=True)
    (kernel / "printk").write_text("4\t4\t1\t7\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    modprobe = bin_dir / "modprobe"
    modprobe.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(SIM)!r})\n"
                        "from rfsim.netconsole_modprobe import main\nsys.exit(main(sys.argv[1:]))\n")
    modprobe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv(netconsole.CONFIGFS_ENV, str(tmp_path / "configfs"))
    monkeypatch.setenv(netconsole.PROC_SYS_ENV, str(tmp_path / "proc-sys"))
    monkeypatch.setattr(attempt_state, "read_boot_id", lambda: "boot-1")
    monkeypatch.setattr(netconsole, "neighbour_mac", lambda ip, port, wait_s=1.0: "52:54:00:12:34:56")
    return tmp_path


def test_apply_loads_the_module_writes_every_attribute_enables_last_and_raises_the_loglevel(
        host: Path, tmp_path: Path) -> None:
    report = netconsole.apply(str(tmp_path / "state"), dict(WANTED))
    assert report["ok"], report["errors"]
    assert report["config"] == {"dev_name": "lo", "local_ip": "127.0.0.1", "remote_ip": "127.0.0.1",
                                "remote_port": "6666", "remote_mac": "52:54:00:12:34:56", "extended": "1",
                                "enabled": "1"}
    assert report["printk"] == [8, 4, 1, 7]
    assert report["baseline"] == {"boot_id": "boot-1", "loaded_module": True, "printk": [4, 4, 1, 7]}


def test_restore_puts_back_exactly_what_was_there_and_unloads_only_what_it_loaded(host: Path) -> None:
    state = str(host / "state")
    netconsole.apply(state, dict(WANTED))
    report = netconsole.restore(state)
    assert report["ok"], report["errors"]
    assert report["config"] is None and not (host / "configfs" / "netconsole").exists()  # modprobe -r
    assert (host / "proc-sys" / "kernel" / "printk").read_text().split() == ["4", "4", "1", "7"]
    assert not (host / "state" / "netconsole" / "baseline.json").exists()


def test_a_module_that_was_already_loaded_stays_loaded_with_its_other_targets(host: Path) -> None:
    theirs = host / "configfs" / "netconsole" / "syslog-box"
    theirs.mkdir(parents=True)
    (theirs / "enabled").write_text("1\n")
    state = str(host / "state")
    assert netconsole.apply(state, dict(WANTED))["baseline"]["loaded_module"] is False
    assert netconsole.restore(state)["ok"]
    assert sorted(p.name for p in (host / "configfs" / "netconsole").iterdir()) == ["syslog-box"]


def test_a_second_apply_in_the_same_boot_keeps_the_first_baseline(host: Path) -> None:
    state = str(host / "state")
    netconsole.apply(state, dict(WANTED))
    again = netconsole.apply(state, dict(WANTED, port=7777))
    assert again["ok"] and again["config"]["remote_port"] == "7777"
    assert again["baseline"]["printk"] == [4, 4, 1, 7]  # not the 8 of our own first apply


def test_a_baseline_of_an_earlier_boot_is_dropped_never_written_back(host: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    state = str(host / "state")
    netconsole.apply(state, dict(WANTED))
    monkeypatch.setattr(attempt_state, "read_boot_id", lambda: "boot-2")  # the reboot undid everything
    (host / "proc-sys" / "kernel" / "printk").write_text("7\t4\t1\t7\n")  # and someone set their own
    report = netconsole.restore(state)
    assert report["baseline"] is None and "nothing applied in this boot" in report["notes"]
    assert (host / "proc-sys" / "kernel" / "printk").read_text().split()[0] == "7"


def test_without_the_module_and_without_modprobe_the_apply_fails_and_says_why(
        host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (host / "bin" / "modprobe").write_text("#!/bin/sh\necho 'modprobe: FATAL: Module netconsole not found' >&2\n"
                                           "exit 1\n")
    report = netconsole.apply(str(host / "state"), dict(WANTED))
    assert not report["ok"] and "modprobe netconsole" in report["errors"][0]


def test_the_target_defaults_to_the_controller_end_of_the_ssh_session(
        host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSH_CONNECTION", "127.0.0.1 50022 127.0.0.1 22")
    report = netconsole.apply(str(host / "state"), dict(WANTED, target=None))
    assert report["config"]["remote_ip"] == "127.0.0.1"


def test_bad_json_is_a_usage_error() -> None:
    for text in ('{"port": 0}', '{"prot": 6666}', "[]", "{"):
        with pytest.raises(UsageError):
            netconsole.parse_wanted(text)


def test_the_subcommand_prints_one_netconsole_line_and_exits_1_when_not_ok(host: Path) -> None:
    (host / "bin" / "modprobe").write_text("#!/bin/sh\nexit 1\n")  # the module cannot load: the apply fails
    env = dict(os.environ)
    done = subprocess.run([sys.executable, str(COLLECTORS / "agent.py"), "--state-dir", str(host / "state"),
                           "netconsole", "apply", "--json", json.dumps(WANTED)],
                          capture_output=True, text=True, env=env, timeout=60)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["k"] for line in lines] == ["netconsole"] and not lines[0]["ok"]
    assert done.returncode == 1
