"""inventory.py reads Ansible inventories as Ansible does.

The fixtures are checked against ``ansible-inventory --list`` itself (hosts, membership,
merged vars, connection settings); bad inputs must be reported at their real file:line:field.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from reprofleet.errors import InventoryError, Location
from reprofleet.inventory import (
    ansible_inventory_command,
    expand_host_pattern,
    expand_host_ranges,
    ini_value,
    load_inventory,
)
from reprofleet.model import CredentialRef
from tests.support import paths

FIXTURES = paths.FIXTURES / "inventories"
EXAMPLE = paths.REPO / "inventory" / "blackwell.yml"
CASES = [
    "yaml_lab/hosts.yml",
    "ini_site/hosts.ini",
    "precedence/hosts.yml",
    "dynamic/inventory.py",
    "multi_source",
    "plugin_config/generator.yml",
    "example",
]
needs_ansible = pytest.mark.skipif(
    ansible_inventory_command() is None, reason="ansible-inventory (ansible-core, a dev extra) is not installed"
)


def case_path(case: str, scratch: Path) -> Path:
    if case == "example":
        return EXAMPLE
    if case.startswith("dynamic/"):  # a checkout may lose the exec bit: run a copy that has it
        copy = scratch / "inventory.py"
        shutil.copy(FIXTURES / case, copy)
        copy.chmod(0o755)
        return copy
    return FIXTURES / case


@functools.lru_cache(maxsize=None)
def ansible_listing(source: str) -> dict[str, Any]:
    command = ansible_inventory_command()
    assert command is not None
    done = subprocess.run(
        [command, "-i", source, "--list"], capture_output=True, text=True, timeout=120,
        env=dict(os.environ, ANSIBLE_INVENTORY_UNPARSED_FAILED="1", ANSIBLE_NOCOLOR="1"),
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def unwrap_unsafe(value: Any) -> Any:
    """ansible-inventory prints a ``!unsafe`` string as {"__ansible_unsafe": text}."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: unwrap_unsafe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap_unsafe(v) for v in value]
    return value


def ansible_membership(listing: dict[str, Any]) -> dict[str, set[str]]:
    groups = {name: body for name, body in listing.items() if name != "_meta"}

    def members(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        body = groups.get(name, {})
        found = set(body.get("hosts", []))
        for child in body.get("children", []):
            if child not in seen:
                found |= members(child, seen | {name})
        return found

    return {name: members(name) for name in groups}


@pytest.fixture(params=CASES)
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return case_path(request.param, tmp_path_factory.mktemp("case"))


@needs_ansible
def test_hosts_and_group_membership_match_ansible_inventory(case: Path) -> None:
    ours = load_inventory(case)
    theirs = ansible_membership(ansible_listing(str(case)))
    everyone = set().union(*theirs.values())
    assert set(ours.names) == everyone
    assert set(ours.groups["all"]) == everyone
    for group, members in theirs.items():
        if group != "all":
            assert set(ours.groups[group]) == members, group
    for group, members in ours.groups.items():  # ansible-inventory leaves out empty groups
        assert group in theirs or not members, group
    for host in ours.hosts:
        assert set(host.groups) == {g for g, m in theirs.items() if host.name in m and g != "all"}


@needs_ansible
def test_merged_variables_match_ansible_inventory(case: Path) -> None:
    hostvars = ansible_listing(str(case))["_meta"]["hostvars"]
    for host in load_inventory(case).hosts:
        assert json.loads(json.dumps(dict(host.vars))) == unwrap_unsafe(hostvars.get(host.name, {})), host.name


@needs_ansible
def test_connection_settings_follow_the_ansible_variables(case: Path) -> None:
    hostvars = ansible_listing(str(case))["_meta"]["hostvars"]
    for host in load_inventory(case).hosts:
        merged = hostvars.get(host.name, {})
        assert host.address == merged.get("ansible_host", host.name)
        assert host.port == int(merged.get("ansible_port", 22))
        assert host.user == merged.get("ansible_user")
        assert host.key_file == merged.get("ansible_ssh_private_key_file")
        interpreter = merged.get("ansible_python_interpreter", "python3")
        assert host.python == ("python3" if interpreter.startswith("auto") else interpreter)
        assert host.gpu_index == merged.get("gpu_index", 0)


# --- what the fixtures pin, without Ansible ------------------------------------------


def test_precedence_is_all_then_groups_by_depth_then_group_vars_files_then_host() -> None:
    hosts = {h.name: h for h in load_inventory(FIXTURES / "precedence" / "hosts.yml").hosts}
    assert hosts["p1"].vars["layer"] == "host_vars"  # host_vars/ beats the host's own entry
    assert hosts["p2"].vars["layer"] == "grandchild-file"  # group_vars file beats inventory
    assert hosts["p3"].vars["layer"] == "all"
    # every group_vars file (even all.yml) comes after every inventory group var
    assert {h.vars["file_beats_inventory"] for h in hosts.values()} == {"group_vars-all-file"}
    assert hosts["p2"].vars["depth_wins"] == "child"  # deeper group over a shallow one
    assert hosts["p2"].vars["same_depth"] == "beta"  # same depth: alphabetical, last wins
    assert hosts["p4"].vars["priority_wins"] == "eta-priority-5"  # ansible_group_priority
    assert "ansible_group_priority" not in hosts["p4"].vars
    assert hosts["p1"].vars["dict_replaced"] == {"c": 3}  # mappings replace, not merge
    assert hosts["p2"].address == "203.0.113.22"  # a host defined twice: the later entry


def test_ini_values_are_read_as_ansible_reads_them() -> None:
    ws06 = load_inventory(FIXTURES / "ini_site" / "hosts.ini").host("ws06")
    host_line = {k: ws06.vars[k] for k in ("reboot_ok", "power_w", "ratio", "tags", "raw", "octal")}
    assert host_line == {"reboot_ok": True, "power_w": 450, "ratio": 0.87, "tags": ["a", "b"],
                         "raw": "yes", "octal": "012"}
    section = {k: ws06.vars[k] for k in ("quoted_var", "number_var", "bool_var", "word_bool",
                                          "with_equals", "comment_kept")}
    assert section == {"quoted_var": "a string", "number_var": 42, "bool_var": False, "word_bool": "yes",
                       "with_equals": "a=b", "comment_kept": "value # this stays in the value"}
    ws05 = load_inventory(FIXTURES / "ini_site" / "hosts.ini").host("ws05")
    assert (ws05.port, ws05.vars["note"], ws05.vars["quoted"]) == (2205, "two words", "single quoted")


def test_ini_value_parsing_matches_ansibles_literal_rules() -> None:
    assert ini_value("None") is None
    assert ini_value("(1, 2)") == [1, 2]
    assert ini_value("b'x'") == "x"
    assert ini_value("1+2j") == "(1+2j)"
    assert ini_value("{'a': (1,)}") == {"a": [1]}
    assert ini_value("not python") == "not python"


def test_an_ini_pdu_written_as_a_python_literal_becomes_a_power_port() -> None:
    ws07 = load_inventory(FIXTURES / "ini_site" / "hosts.ini").host("ws07")
    assert ws07.pdu is not None
    assert (ws07.pdu.driver, ws07.pdu.address, ws07.pdu.outlet) == ("snmp", "198.51.100.250", "7")
    assert ws07.pdu.credentials == CredentialRef("file", "/etc/reprofleet/apc.community")
    assert dict(ws07.pdu.options) == {"model": "apc_rpdu"}


def test_group_vars_folders_read_every_vars_file_in_name_order() -> None:
    inventory = load_inventory(FIXTURES / "yaml_lab" / "hosts.yml")
    ws01 = inventory.host("ws01")
    assert (ws01.vars["driver_branch"], ws01.vars["cuda"]) == ("610", "13.0")
    assert "ignored" not in ws01.vars  # hidden, backup and .txt files are not vars files
    desk = load_inventory(FIXTURES / "ini_site" / "hosts.ini").host("desk-a")
    assert desk.vars["desk_floor"] == 3  # a file without extension counts
    assert (desk.gpu_index, desk.address) == (3, "198.51.100.30")  # host_vars/desk-a.json


def test_yaml_hosts_under_all_are_ungrouped_and_a_key_may_carry_a_port() -> None:
    inventory = load_inventory(FIXTURES / "yaml_lab" / "hosts.yml")
    assert inventory.groups["ungrouped"] == ("jumpbox.lab", "bastion")
    assert inventory.host("bastion").port == 2222
    assert inventory.host("ws01").groups == ("blackwell", "gpu", "monitored", "ws_lab")
    assert "all" in inventory.groups and "all" not in inventory.host("ws01").groups
    assert inventory.host("office-b.lab").user == "office-admin"
    assert inventory.host("ws01").python == "python3"  # auto_silent is Ansible's discovery
    assert inventory.host("ws01").vars["ntp_local"] == {"servers": ["ntp1.lab", "ntp2.lab"], "prefer": "ntp2.lab"}


def test_host_vars_cannot_be_changed_through_a_host() -> None:
    host = load_inventory(FIXTURES / "yaml_lab" / "hosts.yml").host("ws01")
    with pytest.raises(TypeError):
        host.vars["gpu_index"] = 3  # type: ignore[index]


def test_ranges_expand_like_ansible() -> None:
    where = Location("f", 1)
    assert expand_host_ranges("ws[01:03]", where) == ["ws01", "ws02", "ws03"]
    assert expand_host_ranges("n[1:10:2]", where) == ["n1", "n3", "n5", "n7", "n9"]
    assert expand_host_ranges("[a:c].lab", where) == ["a.lab", "b.lab", "c.lab"]
    assert expand_host_ranges("r[1:2]-[a:b]", where) == ["r1-a", "r1-b", "r2-a", "r2-b"]
    assert expand_host_ranges("x[:2]", where) == ["x0", "x1", "x2"]
    assert expand_host_pattern("ws[01:02]:2200", where) == (["ws01", "ws02"], 2200)
    assert expand_host_pattern("[2001:db8::1]:22", where) == (["2001:db8::1"], 22)
    assert expand_host_pattern("10.0.0.1", where) == (["10.0.0.1"], None)


def test_the_example_fleet_names_four_workstations_and_their_power_switches() -> None:
    inventory = load_inventory(EXAMPLE)
    assert inventory.names == ("ws01", "ws02", "ws03", "ws04")
    assert inventory.groups["blackwell"] == inventory.names
    assert inventory.groups["ws_lab"] == ("ws01", "ws02", "ws03")
    drivers = {h.name: h.pdu.driver for h in inventory.hosts if h.pdu}
    assert drivers == {"ws01": "tasmota", "ws02": "shelly", "ws03": "redfish", "ws04": "snmp"}
    ws03, ws04 = inventory.host("ws03"), inventory.host("ws04")
    assert ws03.pdu is not None and ws03.pdu.credentials == CredentialRef("env", "WS03_BMC")
    assert ws04.pdu is not None and (ws04.pdu.outlet, dict(ws04.pdu.options)) == ("7", {"model": "apc_rpdu"})
    assert (ws04.port, ws04.gpu_index, ws04.user) == (2222, 1, "lab")


@needs_ansible
def test_a_dynamic_inventory_script_is_read_through_ansible_inventory(tmp_path: Path) -> None:
    inventory = load_inventory(case_path("dynamic/inventory.py", tmp_path))
    dyn01 = inventory.host("dyn01")
    assert (dyn01.address, dyn01.user, dyn01.vars["role"]) == ("192.0.2.101", "ops", "gpu")
    assert dyn01.pdu is not None and dyn01.pdu.credentials == CredentialRef("env", "DYN01_BMC")
    assert inventory.groups["gpu"] == ("dyn01", "dyn02")
    assert inventory.host("dyn03").groups == ("ungrouped",)


# --- bad input: every error at its real file:line:field ------------------------------


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def error_for(path: Path) -> InventoryError:
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    return caught.value


def test_a_yaml_syntax_error_names_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", """
        all:
          hosts:
            ws01:
              ansible_host: [10.0.0.1
            ws02:
    """)
    error = error_for(path)
    assert str(error.location).startswith(f"{path}:5")
    assert "YAML syntax" in error.reason


def test_a_port_that_is_not_a_number_names_the_line_and_variable(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", """
        all:
          hosts:
            ws01:
              ansible_port: abc
    """)
    error = error_for(path)
    assert str(error.location) == f"{path}:4:ansible_port"
    assert "'abc'" in error.reason


def test_a_bad_ini_host_variable_names_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.ini", """
        [lab]
        ws01 ansible_host=10.0.0.1
        ws02 ansible_port=abc
    """)
    assert str(error_for(path).location) == f"{path}:3:ansible_port"


def test_a_bad_value_in_a_group_vars_file_names_that_file(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.ini", "[lab]\nws01\n")
    vars_file = write(tmp_path, "group_vars/lab.yml", """
        ansible_user: lab
        gpu_index: -1
    """)
    assert str(error_for(path).location) == f"{vars_file}:2:gpu_index"


def test_a_range_with_unequal_padding_names_the_host_key(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", """
        all:
          children:
            lab:
              hosts:
                ws[01:3]:
    """)
    error = error_for(path)
    assert str(error.location) == f"{path}:5:ws[01:3]"
    assert "width" in error.reason


def test_a_backwards_ini_range_names_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.ini", "[lab]\nws[3:1]\n")
    error = error_for(path)
    assert str(error.location) == f"{path}:2:ws[3:1]"
    assert "begin <= end" in error.reason


def test_a_pdu_without_driver_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", """
        all:
          hosts:
            ws01:
              pdu:
                address: 10.0.0.9
    """)
    error = error_for(path)
    assert str(error.location) == f"{path}:4:pdu"
    assert "driver" in error.reason


def test_a_password_in_a_pdu_block_is_refused_without_repeating_it(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", """
        all:
          hosts:
            ws01:
              pdu:
                driver: tasmota
                address: 10.0.0.9
                password: hunter2
    """)
    error = error_for(path)
    assert str(error.location) == f"{path}:7:pdu.password"
    assert "credentials" in error.reason and "hunter2" not in str(error)


def test_an_unknown_credentials_scheme_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", """
        all:
          hosts:
            ws01:
              pdu: {driver: redfish, address: bmc, credentials: "vault:ws01"}
    """)
    error = error_for(path)
    assert str(error.location) == f"{path}:4:pdu.credentials"
    assert "unknown scheme 'vault'" in error.reason


def test_a_literal_secret_as_credentials_is_not_repeated(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.ini", "ws01 pdu=\"{'driver': 'ipmi', 'address': 'b', 'credentials': 's3cr3t!'}\"\n")
    error = error_for(path)
    assert str(error.location) == f"{path}:1:pdu.credentials"
    assert "s3cr3t" not in str(error)


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("[lab]\nws01 novalue\n", 2, "key=value"),
        ("[lab]\nws01\n[lab group]\n", 3, "invalid section"),
        ("[lab:hostvars]\nws01\n", 1, "unknown type"),
        ("[lab]\nws01\n[lab:vars]\njust words\n", 4, "key=value"),
        ("[lab]\nws01 note=\"unclosed\n", 2, "cannot split"),
        ("[lab]\nws01:\n", 2, "reserved for a port"),
    ],
)
def test_an_ini_line_that_cannot_be_parsed_is_named(tmp_path: Path, text: str, line: int, words: str) -> None:
    path = write(tmp_path, "hosts.ini", text)
    error = error_for(path)
    assert error.location.line == line and error.location.file == str(path)
    assert words in error.reason


def test_ini_groups_used_but_never_declared_are_named(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.ini", "[lab]\nws01\n[ghost:vars]\nx=1\n")
    assert str(error_for(path).location) == f"{path}:3:ghost"
    path = write(tmp_path, "hosts2.ini", "[fleet:children]\nlab\nmissing\n[lab]\nws01\n")
    assert str(error_for(path).location) == f"{path}:3:missing"


def test_ini_children_may_be_declared_after_use(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.ini", "[fleet:children]\nlab\n[lab:vars]\nx=1\n[lab]\nws01\n")
    inventory = load_inventory(path)
    assert inventory.groups["fleet"] == ("ws01",) and inventory.host("ws01").vars["x"] == 1


@pytest.mark.parametrize(("name", "text"), [("hosts.yml", ""), ("hosts.yml", "all:\n  children:\n    lab:\n"),
                                            ("hosts.ini", "[lab]\n"), ("hosts.ini", "# nothing\n")])
def test_an_inventory_without_hosts_is_an_error(tmp_path: Path, name: str, text: str) -> None:
    error = error_for(write(tmp_path, name, text))
    assert "empty" in error.reason or "no hosts" in error.reason


def test_a_loop_of_groups_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", """
        a:
          hosts: {ws01: }
          children:
            b:
              children:
                a:
    """)
    error = error_for(path)
    assert str(error.location) == f"{path}:4:b"  # the edge that closes the loop
    assert "loop" in error.reason


def test_a_hosts_list_instead_of_a_mapping_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", "lab:\n  hosts: [ws01, ws02]\n")
    assert str(error_for(path).location) == f"{path}:2:lab.hosts"


def test_a_numeric_host_key_must_be_quoted(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", "lab:\n  hosts:\n    1234:\n")
    error = error_for(path)
    assert str(error.location) == f"{path}:3:1234" and "quote" in error.reason


def test_templated_or_vaulted_connection_settings_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", "lab:\n  hosts:\n    ws01:\n      ansible_host: \"{{ inventory_hostname }}.lab\"\n")
    error = error_for(path)
    assert str(error.location) == f"{path}:4:ansible_host" and "template" in error.reason
    path = write(tmp_path, "vault.yml", """
        lab:
          hosts:
            ws01:
              ansible_user: !vault |
                $ANSIBLE_VAULT;1.1;AES256
                6638
    """)
    error = error_for(path)
    assert str(error.location) == f"{path}:4:ansible_user" and "vault" in error.reason


def test_a_vault_encrypted_vars_file_is_skipped_with_a_warning(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", "lab:\n  hosts:\n    ws01:\n")
    write(tmp_path, "group_vars/lab/vault.yml", "$ANSIBLE_VAULT;1.1;AES256\n6638\n")
    inventory = load_inventory(path)
    assert inventory.names == ("ws01",)
    assert any("vault-encrypted" in w for w in inventory.warnings)


def test_an_unexpected_group_key_is_a_warning_with_a_suggestion(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", "lab:\n  hosts:\n    ws01:\n  host:\n    ws02:\n")
    inventory = load_inventory(path)
    assert inventory.names == ("ws01",)
    assert inventory.warnings == (f"{path}:4:lab.host: skipped: a group holds only vars, children and hosts "
                                  "(did you mean 'hosts'?)",)


def test_a_missing_inventory_is_an_error(tmp_path: Path) -> None:
    assert "no such" in error_for(tmp_path / "nope.yml").reason


@needs_ansible
def test_a_failing_inventory_script_is_an_error_with_ansibles_reason(tmp_path: Path) -> None:
    script = write(tmp_path, "broken.py", "#!/bin/sh\necho 'cmdb unreachable' >&2\nexit 3\n")
    script.chmod(0o755)
    error = error_for(script)
    assert str(error.location) == str(script) and "ansible-inventory failed" in error.reason


@needs_ansible
def test_a_hanging_inventory_script_is_stopped_at_the_deadline(tmp_path: Path) -> None:
    pid_file = tmp_path / "script.pid"
    script = write(tmp_path, "slow.sh", f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 120\n")
    script.chmod(0o755)
    with pytest.raises(InventoryError) as caught:
        load_inventory(script, timeout_s=3)
    assert "no answer within 3s" in caught.value.reason
    if pid_file.exists():  # the script started: it must not outlive the deadline
        pid = int(pid_file.read_text())
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), "the inventory script survived its deadline"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_an_executable_inventory_without_a_shebang_is_still_read_as_data(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts", "[lab]\nws01 ansible_port=2200\n")
    path.chmod(0o755)  # a chmod -R or a FAT mount makes everything executable
    assert load_inventory(path).host("ws01").port == 2200


@needs_ansible
def test_a_folder_of_inventories_is_read_through_ansible_inventory() -> None:
    inventory = load_inventory(FIXTURES / "multi_source")
    assert inventory.groups["lab"] == ("ms01", "ms02") and inventory.groups["office"] == ("ms02",)
    assert inventory.host("ms01").vars["motd"] == "{{ kept as text }}"  # unwrapped from Ansible's JSON
