"""Inventories come from CMDBs and cloud tags, playbooks from anyone: what a file may cost is
bounded, and each refusal is one line naming the file, the line and the field.

An alias bomb is refused while it is composed (milliseconds, not 1.8 s x10 per level), and so
are nesting past the bound and an alias inside its own anchor; numbers are finite and in range
(``timeouts.attempt: .nan`` was accepted, and the host supervisor exited at once); an SNMP OID
template holds numbers, dots, ``{outlet}`` and ``{pdu}``, nothing ``str.format`` could act on.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from tests.support.hostile_host import COUNTS
from reprofleet.errors import InputError, InventoryError, PlaybookError
from reprofleet.inventory import load_inventory
from reprofleet.playbook import load_playbook
from reprofleet.power.drivers.snmp import generic_model
from reprofleet.power.options import Options, PowerConfigError

BOMB_SECONDS = 0.5  # a refused bomb costs less than this; on main, 7 levels took 1.8 s, and x10 per level


def alias_bomb(levels: int, indent: str = "") -> str:
    """``levels`` anchors of ten aliases each: 10**levels values once expanded, in ~50 bytes a level."""
    names = "abcdefghijklmnop"
    lines = [f"{indent}{names[0]}: &{names[0]} [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, levels):
        refs = ", ".join([f"*{names[level - 1]}"] * 10)
        lines.append(f"{indent}{names[level]}: &{names[level]} [{refs}]")
    return "\n".join(lines) + "\n"


def playbook(tmp_path: Path, text: str) -> Path:
    (tmp_path / "poc.py").write_text("")
    path = tmp_path / "campaign.yml"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def inventory(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def one_line(error: InputError, file: Path, where: str) -> None:
    COUNTS["cases"] += 1
    COUNTS["refused"] += 1
    text = str(error)
    assert "\n" not in text and len(text) < 400, text
    assert text.startswith(f"{file}:{where}"), text


def test_an_alias_bomb_in_a_playbook_is_refused_in_milliseconds(tmp_path: Path) -> None:
    text = "name: t\npoc: {script: poc.py}\nattempts: 1\nmatrix: [{name: a}]\ndefaults:\n  vars:\n" \
           + alias_bomb(9, "    ")
    path = playbook(tmp_path, text)
    assert 400 <= len(text.encode()) <= 700
    started = time.perf_counter()
    with pytest.raises(PlaybookError) as caught:
        load_playbook(path)
    elapsed = time.perf_counter() - started
    assert elapsed < BOMB_SECONDS, f"{elapsed:.2f} s"
    assert "alias bomb" in caught.value.reason
    one_line(caught.value, path, "12:defaults.vars.f[0]")


def test_an_alias_bomb_in_an_inventory_var_is_refused_in_milliseconds(tmp_path: Path) -> None:
    path = inventory(tmp_path, "all:\n  hosts:\n    ws01:\n      ansible_host: 10.0.0.1\n  vars:\n"
                     + alias_bomb(7, "    "))
    started = time.perf_counter()
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    assert time.perf_counter() - started < BOMB_SECONDS
    one_line(caught.value, path, "11:all.vars.f")


def test_a_few_aliases_still_load(tmp_path: Path) -> None:
    path = inventory(tmp_path, """
        all:
          vars: {pdu_common: &pdu {driver: tasmota, address: 10.0.9.1}}
          hosts:
            ws01: {ansible_host: 10.0.0.1, gpu_index: 1, shared: *pdu}
            ws02: {ansible_host: 10.0.0.2, shared: *pdu}
        """)
    assert [h.name for h in load_inventory(path).hosts] == ["ws01", "ws02"]


@pytest.mark.parametrize("text,where,words", [
    ("x: " + "[" * 100 + "]" * 100 + "\n", "1:x[0][0]....[0][0]", "nested deeper than 64"),
    ("x: &loop [1, *loop]\n", "1:x[1]", "inside its own anchor"),
    ("x: &loop {a: 1, b: {c: *loop}}\n", "1:x.b.c", "inside its own anchor"),
])
def test_deep_nesting_and_alias_loops_are_refused_where_they_are(tmp_path: Path, text: str, where: str,
                                                                 words: str) -> None:
    path = inventory(tmp_path, text)
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    assert words in caught.value.reason
    one_line(caught.value, path, where)


TOP = "name: t\npoc: {script: poc.py}\nattempts: 1\nmatrix:\n  - name: a\n"


@pytest.mark.parametrize("text,where", [
    (TOP + "timeouts: {attempt: .nan}\n", "6:timeouts.attempt"),
    (TOP + "timeouts: {attempt: .inf}\n", "6:timeouts.attempt"),
    (TOP + "timeouts: {boot: 1.0e+100}\n", "6:timeouts.boot"),
    (TOP + "timeouts: {connect: " + "1" + "0" * 100 + "}\n", "6:timeouts.connect"),
    (TOP.replace("attempts: 1", "attempts: 1" + "0" * 100), "3:attempts"),
    (TOP + "seed: 1" + "0" * 100 + "\n", "6:seed"),
    (TOP + "    power_limit: .nan\n", "6:matrix[0].power_limit"),
    (TOP + "    power_limit: 1.0e+9\n", "6:matrix[0].power_limit"),
    (TOP + "    graphics_clocks: [180, 1" + "0" * 100 + "]\n", "6:matrix[0].graphics_clocks"),
    (TOP + "    args: {spec_tokens: .nan}\n", "6:matrix[0].args.spec_tokens"),
    (TOP + "    host_debug: {panic: 1" + "0" * 100 + "}\n", "6:matrix[0].host_debug.panic"),
])
def test_a_number_that_is_not_finite_or_out_of_range_is_refused_at_its_line(tmp_path: Path, text: str,
                                                                            where: str) -> None:
    path = playbook(tmp_path, text)
    with pytest.raises(PlaybookError) as caught:
        load_playbook(path)
    one_line(caught.value, path, where)


def test_a_timeout_of_a_day_still_loads(tmp_path: Path) -> None:
    book = load_playbook(playbook(tmp_path, TOP + "timeouts: {attempt: 86400}\n"))
    assert book.timeouts.attempt == 86400.0


@pytest.mark.parametrize("text,where", [
    ("all:\n  hosts:\n    ws01:\n      gpu_index: 1" + "0" * 100 + "\n", "4:gpu_index"),
    ("all:\n  hosts:\n    ws01:\n      ansible_port: '1" + "0" * 30 + "'\n", "4:ansible_port"),
    ("all:\n  hosts:\n    ws[1:99999999]:\n", "3:"),
    ("all:\n  hosts:\n    ws[1:1000][1:1000]:\n", "3:"),
])
def test_an_inventory_number_or_range_out_of_bounds_is_refused_at_its_line(tmp_path: Path, text: str,
                                                                          where: str) -> None:
    path = inventory(tmp_path, text)
    started = time.perf_counter()
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    assert time.perf_counter() - started < BOMB_SECONDS
    one_line(caught.value, path, where)


GENERIC = ("control_oid", "status_oid", "on_value", "off_value", "state_on_value", "state_off_value")


@pytest.mark.parametrize("oid", ["1.3.6.1.{0}", "1.3.6.1.{outlet.__class__}", "1.3.6.1.{outlet:>99999999}",
                                 "1.3.6.1.%s", "1.3.{outlet}}", "1.3.{{outlet}}", "1.3.6.1.{outlet!r}"])
def test_an_snmp_oid_template_with_format_characters_is_refused_naming_the_option(oid: str) -> None:
    where = "hosts.yml:7:pdu"
    COUNTS["cases"] += 1
    with pytest.raises(PowerConfigError) as caught:
        generic_model(Options({"control_oid": oid}, where, GENERIC), where)
    COUNTS["refused"] += 1
    assert str(caught.value).startswith("hosts.yml:7:pdu: pdu option control_oid: ")
    assert "\n" not in str(caught.value)


def test_an_snmp_oid_template_of_numbers_and_placeholders_is_kept() -> None:
    oids = generic_model(Options({"control_oid": ".1.3.6.1.4.1.13742.6.4.1.2.1.2.{pdu}.{outlet}"}, "w", GENERIC), "w")
    assert oids.control("4", "2") == ".1.3.6.1.4.1.13742.6.4.1.2.1.2.2.4"


@pytest.mark.parametrize("raw,name", [({"timeout_s": float("nan")}, "timeout_s"),
                                      ({"timeout_s": float("inf")}, "timeout_s"),
                                      ({"tries": 10 ** 100}, "tries"), ({"settle_s": "1e999"}, "settle_s")])
def test_a_power_option_that_is_not_finite_or_in_range_is_refused(raw: dict, name: str) -> None:
    from reprofleet.power.base import DriverSettings
    from reprofleet.power.settings import settings_from_options

    COUNTS["cases"] += 1
    with pytest.raises(PowerConfigError) as caught:
        settings_from_options(DriverSettings(), Options(raw, "hosts.yml:9:pdu", ()))
    COUNTS["refused"] += 1
    assert f"pdu option {name} must be" in str(caught.value) and len(str(caught.value)) < 300
