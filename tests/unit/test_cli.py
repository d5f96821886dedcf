"""Bad input stops everything with one line naming file:line:field; a dry run contacts nobody."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.listener import CountingPort
from tests.support.fleet_campaign import write_playbook


def reprofleet(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reprofleet", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def _inventory(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text(body)
    return path


def test_a_malformed_inventory_is_one_line_with_file_line_field_and_exit_2(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path, "all:\n  hosts:\n    ws01:\n      ansible_host: 10.213.254.254\n"
                                     "    ws02:\n      ansible_port: twenty-two\n")
    book = write_playbook(tmp_path / "book", attempts=1)
    result = reprofleet("campaign", "--hosts", str(inventory), "--playbook", str(book), cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert f"{inventory}:6:ansible_port" in line
    assert not (tmp_path / "reports").exists()


def test_a_misspelt_playbook_key_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path, "all:\n  hosts:\n    ws01:\n      ansible_host: 10.213.254.254\n")
    book = write_playbook(tmp_path / "book", attempts=1, extra="atempts: 3\n")
    result = reprofleet("campaign", "--hosts", str(inventory), "--playbook", str(book), cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "atempts" in line and "did you mean 'attempts'" in line and str(book) in line


def test_a_dry_run_prints_the_plan_and_contacts_nothing(tmp_path: Path) -> None:
    port = CountingPort()  # both hosts on a port that counts connections: a contact shows there
    inventory = _inventory(tmp_path, f"all:\n  hosts:\n    ws01:\n      ansible_host: 127.0.0.1\n      ansible_port: {port.port}\n"
                                     f"    ws02:\n      ansible_host: 127.0.0.1\n      ansible_port: {port.port}\n")
    book = write_playbook(tmp_path / "book", attempts=3,
                          cells="  - name: default\n  - name: lgc\n    graphics_clocks: [180, 2800]\n")
    with port:
        result = reprofleet("campaign", "--hosts", str(inventory), "--playbook", str(book), "--dry-run", cwd=tmp_path)
    assert port.connections == 0, "the dry run contacted a host"
    assert result.returncode == 0, result.stderr
    assert "attempts planned: 12" in result.stdout
    assert "lgc: gpu {'graphics_clocks': [180, 2800]}" in result.stdout
    assert not (tmp_path / "reports").exists()


def test_a_dry_run_with_a_limit_plans_only_the_hosts_the_pattern_chose_and_says_so(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path, "all:\n  children:\n    lab:\n      hosts:\n"
                                     "        ws01:\n          ansible_host: 10.213.254.254\n"
                                     "        ws02:\n          ansible_host: 10.213.254.253\n"
                                     "        ws03:\n          ansible_host: 10.213.254.252\n")
    book = write_playbook(tmp_path / "book", attempts=2)
    result = reprofleet("campaign", "--hosts", str(inventory), "--playbook", str(book), "--dry-run",
                        "--limit", "lab:!ws02", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"--limit 'lab:!ws02' chose 2 of the 3 hosts of {inventory}" in result.stdout
    assert "hosts (2): ws01 (10.213.254.254:22), ws03 (10.213.254.252:22)" in result.stdout
    assert "attempts planned: 4" in result.stdout


def test_a_limit_that_matches_nothing_runs_nothing_and_names_the_part(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path, "all:\n  hosts:\n    ws01:\n      ansible_host: 10.213.254.254\n")
    book = write_playbook(tmp_path / "book", attempts=1)
    result = reprofleet("campaign", "--hosts", str(inventory), "--playbook", str(book), "--limit", "ws1", cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "'ws1' matches no host or group" in line and "did you mean 'ws01'" in line
    assert not (tmp_path / "reports").exists()


def test_a_number_flag_that_is_not_a_number_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path, "all:\n  hosts:\n    ws01:\n      ansible_host: 10.213.254.254\n")
    book = write_playbook(tmp_path / "book", attempts=1)
    attempts = reprofleet("campaign", "--hosts", str(inventory), "--playbook", str(book), "--attempts", "x", cwd=tmp_path)
    assert attempts.returncode == 2 and attempts.stderr.strip().splitlines() == [
        "reprofleet: error: --attempts takes a whole number, not 'x'"]
    dwell = subprocess.run([sys.executable, "-m", "reprofleet", "power", "ws01", "cycle", "--hosts", str(inventory),
                            "--dwell", "x", "--ignore-lease"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
    assert dwell.returncode == 2 and "--dwell takes seconds (a number), not 'x'" in dwell.stderr
    assert "Traceback" not in attempts.stderr + dwell.stderr and not (tmp_path / "reports").exists()


def test_a_power_action_without_a_terminal_or_yes_does_nothing_and_fails(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path, "all:\n  hosts:\n    ws01:\n      ansible_host: 10.213.254.254\n"
                                     "      pdu: {driver: tasmota, address: 10.213.254.1, outlet: 1}\n")
    result = subprocess.run([sys.executable, "-m", "reprofleet", "power", "ws01", "cycle", "--hosts", str(inventory),
                             "--ignore-lease"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "reprofleet: error: power cycle ws01? there is no terminal to ask on: pass --yes to do it"]
    assert not (tmp_path / "reports").exists()


def test_a_playbooks_hosts_pattern_chooses_its_hosts_before_the_limit_and_a_typo_names_its_line(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path, "all:\n  children:\n    lab:\n      hosts:\n"
                                     "        ws01:\n          ansible_host: 10.213.254.254\n"
                                     "        ws02:\n          ansible_host: 10.213.254.253\n"
                                     "    office:\n      hosts:\n        ws03:\n          ansible_host: 10.213.254.252\n")
    book = write_playbook(tmp_path / "book", attempts=1, extra="hosts: lab\n")
    both = reprofleet("campaign", "--hosts", str(inventory), "--playbook", str(book), "--dry-run", "--limit", "!ws01",
                      cwd=tmp_path)
    assert both.returncode == 0, both.stderr
    assert "the playbook's hosts: 'lab' and --limit '!ws01' chose 1 of the 3 hosts" in both.stdout
    assert "hosts (1): ws02" in both.stdout
    typo = write_playbook(tmp_path / "typo", attempts=1, extra="hosts: labs\n")
    wrong = reprofleet("campaign", "--hosts", str(inventory), "--playbook", str(typo), "--dry-run", cwd=tmp_path)
    assert wrong.returncode == 2
    (line,) = wrong.stderr.strip().splitlines()
    assert ":hosts:" in line and "'labs' matches no host or group" in line and "did you mean 'lab'" in line
