"""The inventory's ``recovery:`` ladder and ``nmi_reboot_s``: the default is ``[cycle]``, and every
mistake is one line naming file:line:field, an ``nmi`` on a device without one included."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from reprofleet.errors import InventoryError
from reprofleet.inventory import load_inventory
from reprofleet.model import RecoveryRung
from reprofleet.power.ports import PowerPreflightError, build_host_power


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    return path


def error_for(path: Path) -> str:
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    return str(caught.value)


def test_the_ladder_defaults_to_cycle_and_takes_nmi_first_with_its_own_wait(tmp_path: Path) -> None:
    path = write(tmp_path, """
        all:
          hosts:
            ws01:
              recovery: [nmi, cycle]
              nmi_reboot_s: 420
            ws02: {}
    """)
    ws01, ws02 = load_inventory(path).hosts
    assert ws01.recovery == (RecoveryRung.NMI, RecoveryRung.CYCLE) and ws01.nmi_reboot_s == 420.0
    assert ws01.recovery_where == f"{path}:4:recovery"
    assert ws02.recovery == (RecoveryRung.CYCLE,) and ws02.nmi_reboot_s is None


@pytest.mark.parametrize("ladder, words", [
    ("[nmi, reboot]", "4:recovery[1]: unknown recovery rung 'reboot'"),
    ("[nmi]", "4:recovery: must end with cycle"),
    ("[cycle, nmi]", "4:recovery: must end with cycle"),
    ("[cycle, cycle]", "4:recovery: names a rung twice"),
    ("{nmi: 1}", "4:recovery: must be a list of rungs"),
])
def test_a_wrong_ladder_is_one_line_naming_file_line_and_field(tmp_path: Path, ladder: str, words: str) -> None:
    path = write(tmp_path, f"""
        all:
          hosts:
            ws01:
              recovery: {ladder}
    """)
    assert f"{path}:{words}" in error_for(path)


def test_a_wait_that_is_not_seconds_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, """
        all:
          hosts:
            ws01:
              nmi_reboot_s: forever
    """)
    assert f"{path}:4:nmi_reboot_s: must be seconds" in error_for(path)


def test_nmi_on_a_plug_that_sends_none_is_refused_at_the_ladders_line(tmp_path: Path) -> None:
    path = write(tmp_path, """
        all:
          hosts:
            ws01:
              recovery: [nmi, cycle]
              pdu: {driver: tasmota, address: 10.0.0.41}
            ws02:
              pdu: {driver: tasmota, address: 10.0.0.42}
    """)
    hosts = load_inventory(path).hosts
    with pytest.raises(PowerPreflightError) as caught:
        build_host_power(hosts)
    assert f"{path}:4:recovery: ws01: recovery: nmi needs a device that sends an NMI" in str(caught.value)
    assert "ws02" not in str(caught.value)
    assert set(build_host_power(hosts[1:])) == {"ws02"}  # the default ladder needs no NMI


def test_nmi_through_a_bmc_is_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WS01_BMC", "admin:pw")
    path = write(tmp_path, """
        all:
          hosts:
            ws01:
              recovery: [nmi, cycle]
              pdu: {driver: ipmi, address: 10.0.0.61, credentials: "env:WS01_BMC"}
    """)
    assert set(build_host_power(load_inventory(path).hosts)) == {"ws01"}
