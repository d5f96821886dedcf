"""``reprofleet init`` and the built-in playbooks: the first steps after ``pip install``.

The installed wheel itself is tested in test_wheel_install.py; here, in-process: what init
writes for the flags or a person's answers, what it refuses (exit 2, nothing written), and
how a playbook name finds the built-in file.
"""

from __future__ import annotations

import builtins
import sys
from pathlib import Path

import pytest

from reprofleet.inventory import load_inventory
from reprofleet.playbook import builtin, load_playbook
from tests.support.cli_inprocess import run_task
from tests.support.paths import REPO


def test_a_built_in_playbook_is_found_by_name_and_as_the_default_path_when_the_folder_has_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    seed = REPO / "playbooks" / "sm120-hostwedge.yml"
    assert builtin.builtin_names() == ("bisect-vllm", "demo", "search-clock", "sm120-hostwedge")
    for name in ("sm120-hostwedge", "sm120-hostwedge.yml", "playbooks/sm120-hostwedge.yml"):
        assert builtin.locate(name) == seed, name
        assert load_playbook(name).path == str(seed)
    assert builtin.locate("elsewhere/sm120-hostwedge.yml") == Path("elsewhere/sm120-hostwedge.yml")
    assert builtin.locate("mine") == Path("mine")  # no such built-in: the reader says it is missing
    own = tmp_path / "sm120-hostwedge.yml"  # a user's own file of that name always wins
    own.write_text(seed.read_text().replace("name: sm120-hostwedge", "name: mine"))
    (tmp_path / "poc").mkdir()
    (tmp_path / "poc" / "sm120_hostwedge.py").write_text("print('mine')\n")
    assert builtin.locate("sm120-hostwedge.yml") == Path("sm120-hostwedge.yml")
    assert load_playbook("sm120-hostwedge.yml").name == "mine"


def test_a_missing_playbook_names_the_built_in_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    ws1: {ansible_host: 192.0.2.11}\n")
    code, _, err = run_task(capsys, "campaign", "-i", "hosts.yml", "-p", "sm120", "--dry-run")
    assert code == 2 and "built-in playbooks, by name: bisect-vllm, demo, search-clock, sm120-hostwedge" in err


def test_init_writes_an_inventory_that_loads_the_seed_playbook_and_its_poc(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run_task(capsys, "init", "--host", "ws1=192.168.1.20", "--host", "ws2=ws2.lab", "--driver", "snmp",
                              "--pdu", "192.168.1.250", "--outlet", "3", "--outlet", "4", "--user", "lab",
                              "--credentials", "env:LAB_PDU", "--pdu-option", "model=apc_rpdu")
    assert code == 0, err
    assert "reprofleet doctor --cycle -i inventory.yml -p sm120-hostwedge.yml" in out
    hosts = {h.name: h for h in load_inventory(tmp_path / "inventory.yml").hosts}
    assert hosts["ws1"].address == "192.168.1.20" and hosts["ws2"].address == "ws2.lab"
    assert hosts["ws1"].user == "lab" and hosts["ws2"].gpu_index == 0
    assert [(h.pdu.driver, h.pdu.address, h.pdu.outlet) for h in hosts.values() if h.pdu] == [
        ("snmp", "192.168.1.250", "3"), ("snmp", "192.168.1.250", "4")]
    assert hosts["ws1"].pdu is not None and hosts["ws1"].pdu.credentials is not None
    assert hosts["ws1"].pdu.options["model"] == "apc_rpdu"
    book = load_playbook(tmp_path / "sm120-hostwedge.yml")
    assert Path(book.poc.script) == tmp_path / "poc" / "sm120_hostwedge.py"
    assert (tmp_path / "sm120-hostwedge.yml").read_bytes() == (REPO / "playbooks" / "sm120-hostwedge.yml").read_bytes()


def test_init_never_writes_over_a_file_and_writes_nothing_when_one_exists(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "poc").mkdir()
    (tmp_path / "poc" / "sm120_hostwedge.py").write_text("mine\n")
    code, out, err = run_task(capsys, "init", "--host", "ws1=192.0.2.11")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "sm120_hostwedge.py exists; reprofleet init writes nothing over a file" in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["poc", "sm120_hostwedge.py"]
    assert (tmp_path / "poc" / "sm120_hostwedge.py").read_text() == "mine\n"


@pytest.mark.parametrize("argv, words", [
    (["--host", "ws1"], "give NAME=ADDRESS"),
    (["--host", "ws1=a", "--host", "ws1=b"], "each host needs its own name"),
    (["--host", "ws1=a", "--driver", "kasa-typo", "--pdu", "p"], "not a power driver"),
    (["--host", "ws1=a", "--host", "ws2=b", "--driver", "shelly", "--pdu", "p1", "--pdu", "p2", "--pdu", "p3"],
     "one address for every host, or one per host (2), not 3"),
    (["--host", "ws1=a", "--host", "ws2=b", "--driver", "tasmota", "--pdu", "p"],  # two hosts, one outlet
     "would not load (nothing written)"),
    (["--host", "ws1=a", "--driver", "snmp", "--pdu", "p"], "inventory.yml:"),  # no model: the driver's own line
    (["--host", "ws1=a", "--driver", "snmp", "--pdu", "p", "--pdu-option", "model"], "give KEY=VALUE"),
    (["--host", "ws1=a", "--pdu", "p"], "go with --driver"),
    (["--host", "ws1=a", "--driver", "shelly", "--pdu", "p", "--credentials", "hunter2"], "--credentials"),
    (["--host", "ws1=a", "--playbook", "nope"], "no built-in playbook 'nope'"),
])
def test_init_refuses_a_wrong_flag_in_one_line_and_writes_nothing(
        argv: list[str], words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_task(capsys, "init", *argv)
    assert code == 2 and words in err, err
    assert list(tmp_path.iterdir()) == []


def test_init_without_hosts_asks_at_a_terminal_and_fails_in_one_line_without_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_task(capsys, "init")
    assert code == 2 and "no terminal to ask on: pass --host NAME=ADDRESS" in err and list(tmp_path.iterdir()) == []
    answers = iter(["ws1=192.0.2.11 ws2=192.0.2.12", "", "tasmota", "192.0.2.101 192.0.2.102", "", "", ""])
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(builtins, "input", lambda question: next(answers))
    code, _, err = run_task(capsys, "init")
    assert code == 0, err
    hosts = load_inventory(tmp_path / "inventory.yml").hosts
    assert [(h.name, h.pdu.address if h.pdu else None) for h in hosts] == [("ws1", "192.0.2.101"),
                                                                           ("ws2", "192.0.2.102")]
