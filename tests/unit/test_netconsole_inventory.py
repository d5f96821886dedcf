"""The inventory's ``netconsole:``: a port is enough, group vars apply, and every mistake is
one line naming file:line:field."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from reprofleet.errors import InventoryError
from reprofleet.inventory import load_inventory
from reprofleet.model import NetconsoleSetting


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    return path


def error_for(path: Path) -> InventoryError:
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    return caught.value


def test_a_port_alone_leaves_interface_and_target_to_the_host(tmp_path: Path) -> None:
    path = write(tmp_path, """
        all:
          hosts:
            ws01:
              netconsole: {port: 6667}
            ws02: {}
    """)
    ws01, ws02 = load_inventory(path).hosts
    assert ws01.netconsole == NetconsoleSetting(port=6667, dev=None, target=None, extended=True)
    assert ws01.netconsole.where == f"{path}:4:netconsole"
    assert ws02.netconsole is None  # only hosts that ask for it


def test_a_group_var_applies_to_its_hosts_and_a_host_can_turn_it_off(tmp_path: Path) -> None:
    path = write(tmp_path, """
        all:
          children:
            lab:
              vars:
                netconsole: {port: 6666, dev: enp5s0, target: 10.0.0.2, extended: false}
              hosts:
                ws01: {}
                ws02: {netconsole: false}
    """)
    ws01, ws02 = load_inventory(path).hosts
    assert ws01.netconsole == NetconsoleSetting(port=6666, dev="enp5s0", target="10.0.0.2", extended=False)
    assert ws02.netconsole is None


def test_the_controllers_listening_address_can_be_named_and_defaults_to_none(tmp_path: Path) -> None:
    path = write(tmp_path, """
        all:
          hosts:
            ws01:
              netconsole: {port: 6666, listen: 10.0.0.2}
            ws02:
              netconsole: {port: 6666}
    """)
    ws01, ws02 = load_inventory(path).hosts
    assert ws01.netconsole is not None and ws01.netconsole.listen == "10.0.0.2"
    assert ws02.netconsole is not None and ws02.netconsole.listen is None  # the receiver finds the route's


@pytest.mark.parametrize("block, line, field, words", [
    ("{port: 70000}", 4, "netconsole.port", "UDP port"),
    ("{port: six}", 4, "netconsole.port", "UDP port"),
    ("{target: controller.lab}", 4, "netconsole.target", "IP address"),
    ("{dev: 'eth 0'}", 4, "netconsole.dev", "interface name"),
    ("{extended: 'yes'}", 4, "netconsole.extended", "true or false"),
    ("{prot: 6666}", 4, "netconsole.prot", "did you mean 'port'"),
    ("6666", 4, "netconsole", "mapping"),
    ("{listen: 0.0.0.0}", 4, "netconsole.listen", "not 0.0.0.0"),
    ("{listen: controller.lab}", 4, "netconsole.listen", "IPv4 address"),
])
def test_a_mistake_names_file_line_and_field(tmp_path: Path, block: str, line: int, field: str, words: str) -> None:
    path = write(tmp_path, f"""
        all:
          hosts:
            ws01:
              netconsole: {block}
    """)
    error = error_for(path)
    assert str(error.location) == f"{path}:{line}:{field}", error
    assert words in error.reason
    assert "\n" not in str(error)


def test_a_key_on_its_own_line_is_named_on_that_line(tmp_path: Path) -> None:
    path = write(tmp_path, """
        all:
          hosts:
            ws01:
              netconsole:
                port: 6666
                target: not-an-address
    """)
    assert str(error_for(path).location) == f"{path}:6:netconsole.target"
