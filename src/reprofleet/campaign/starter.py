"""``reprofleet init``: a starter inventory and playbook in the current folder, for the hosts named.

After ``pip install reprofleet-*.whl`` a user has no inventory and no playbook beside them.
``init`` writes ``inventory.yml`` (their hosts, login and power device, as the annotated
example ``inventory/blackwell.yml`` shows every option of), a copy of a built-in playbook
(the seed's by default) and the PoC it pushes, so the next commands work in that folder and
each file is theirs to edit. Nothing is overwritten: if any file it would write exists, it
writes none and says which (exit 2). The inventory is checked the way a campaign reads it
(the loader, and every power driver built without contacting anything) before a byte is
written.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from reprofleet.credentials import Secret, parse_credential_ref
from reprofleet.errors import ReprofleetError, UsageError
from reprofleet.inventory import load_inventory
from reprofleet.playbook import builtin, load_playbook
from reprofleet.power.ports import build_host_power
from reprofleet.power.registry import DRIVERS

INVENTORY = "inventory.yml"
_NAME_CHARACTERS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


@dataclass(frozen=True)
class StarterHost:
    """One host as the user named it, and the outlet that feeds it (None: no power device)."""

    name: str
    address: str
    pdu_address: str | None = None
    outlet: str | None = None


@dataclass(frozen=True)
class Starter:
    """What ``init`` was told: the hosts, their login and their power device."""

    hosts: tuple[StarterHost, ...]
    user: str | None = None
    driver: str | None = None
    credentials: str | None = None  # env:VAR or file:PATH, for every host's device
    options: tuple[tuple[str, str], ...] = ()  # the device's further pdu: options (snmp's model: ...)
    playbook: str = builtin.SEED


def starter(host_words: Sequence[str], *, driver: str | None = None, pdus: Sequence[str] = (),
            outlets: Sequence[str] = (), user: str | None = None, credentials: str | None = None,
            options: Sequence[str] = (), playbook: str = builtin.SEED) -> Starter:
    """The flags (or a person's answers) as a Starter; one line naming the flag when one is wrong."""
    hosts = [_host_word(word) for word in host_words]
    if not hosts:
        raise UsageError("which hosts? --host NAME=ADDRESS, once per host")
    if len({h[0] for h in hosts}) < len(hosts):
        raise UsageError("--host: each host needs its own name")
    if driver and driver not in DRIVERS:
        raise UsageError(f"--driver: {driver!r} is not a power driver; one of {', '.join(sorted(DRIVERS))}")
    if not driver and (pdus or outlets or credentials or options):
        raise UsageError("--pdu, --outlet, --pdu-option and --credentials go with --driver")
    settings = tuple(_option_word(word) for word in options)
    if driver and len(pdus) not in (1, len(hosts)):
        raise UsageError(f"--pdu: one address for every host, or one per host ({len(hosts)}), not {len(pdus)}")
    if outlets and len(outlets) != len(hosts):
        raise UsageError(f"--outlet: one per host ({len(hosts)}), not {len(outlets)}")
    if credentials:
        try:
            parse_credential_ref(credentials)
        except ReprofleetError as exc:
            raise UsageError(f"--credentials: {exc}") from None
    if builtin.builtin_playbook(playbook) is None:
        raise UsageError(f"--playbook: no built-in playbook {playbook!r}; one of {', '.join(builtin.builtin_names())}")
    rows = tuple(StarterHost(name, address, (pdus[0] if len(pdus) == 1 else pdus[i]) if driver else None,
                             outlets[i] if outlets else None) for i, (name, address) in enumerate(hosts))
    return Starter(rows, user or None, driver or None, credentials or None, settings, builtin.playbook_stem(playbook))


def _host_word(word: str) -> tuple[str, str]:
    name, _, address = word.partition("=")
    name, address = name.strip(), address.strip()
    if not name or not address or not set(name) <= _NAME_CHARACTERS or any(c.isspace() for c in address):
        raise UsageError(f"--host {word!r}: give NAME=ADDRESS (a name of letters, digits, - _ .; an address or "
                         "DNS name)")
    return name, address


def _option_word(word: str) -> tuple[str, str]:
    key, _, value = word.partition("=")
    key, value = key.strip(), value.strip()
    if not key or not value or not set(key) <= _NAME_CHARACTERS or key in ("driver", "address", "outlet", "credentials"):
        raise UsageError(f"--pdu-option {word!r}: give KEY=VALUE for an option of the device (model=apc_rpdu); "
                         "driver, address, outlet and credentials have their own flags")
    return key, value


def inventory_text(start: Starter) -> str:
    """The starter inventory: an Ansible YAML inventory reprofleet and Ansible both read."""
    example = builtin.example_inventory()
    lines = ["# Written by `reprofleet init`: your hosts, their login and their power device.",
             f"# Every option, annotated: {example if example else 'inventory/blackwell.yml'}",
             "all:", "  vars:", "    gpu_index: 0              # the GPU under test on each host"]
    if start.user:
        lines.append(f"    ansible_user: {_yaml(start.user)}")
    lines.append("  hosts:")
    for host in start.hosts:
        lines += [f"    {host.name}:", f"      ansible_host: {_yaml(host.address)}"]
        if start.driver and host.pdu_address:
            lines += ["      pdu:", f"        driver: {start.driver}", f"        address: {_yaml(host.pdu_address)}"]
            if host.outlet is not None:
                lines.append(f"        outlet: {_yaml(host.outlet)}")
            if start.credentials:
                lines.append(f"        credentials: {_yaml(start.credentials)}")
            lines += [f"        {key}: {_value(value)}" for key, value in start.options]
    return "\n".join(lines) + "\n"


def _yaml(value: str) -> str:
    """A scalar quoted (JSON's double quotes are YAML's): an address is never read as a number."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _value(text: str) -> str:
    """An option's value as YAML reads it when it is a plain number or boolean, else quoted."""
    if text in ("true", "false") or text.lstrip("-").isdigit():
        return text
    return _yaml(text)


def planned_files(start: Starter) -> dict[str, bytes]:
    """Every file ``init`` writes, by its path relative to the folder: the inventory, the
    playbook and the PoC it names (at the same relative path, so the copy finds it)."""
    source = builtin.builtin_playbook(start.playbook)
    assert source is not None  # starter() checked the name
    book = load_playbook(source)
    poc = Path(book.poc.script)
    return {INVENTORY: inventory_text(start).encode(), source.name: source.read_bytes(),
            poc.relative_to(source.parent).as_posix(): poc.read_bytes()}


def check_inventory(text: str) -> None:
    """Read the inventory as a campaign would and build its power drivers (nothing contacted;
    a credentials reference is not read): a starter that would not load is never written."""
    with tempfile.TemporaryDirectory(prefix="reprofleet-init-") as scratch:
        path = Path(scratch) / INVENTORY
        path.write_text(text, encoding="utf-8")
        try:
            hosts = load_inventory(path).hosts
            build_host_power(hosts, None, secrets=lambda ref: Secret("not-read"), lock_dir=Path(scratch) / "locks")
        except ReprofleetError as exc:  # the flags' fault: exit 2, naming the inventory that was not written
            words = " ".join(line.strip() for line in str(exc).splitlines())
            raise UsageError(f"the inventory these flags make would not load (nothing written): "
                             f"{words.replace(str(path), INVENTORY)}") from None


def write_starter(start: Starter, folder: Path) -> list[Path]:
    """Write the starter files into ``folder``; refuse (UsageError, nothing written) if any exists."""
    files = planned_files(start)
    taken = [name for name in files if (folder / name).exists() or (folder / name).is_symlink()]
    if taken:
        raise UsageError(f"{folder / taken[0]} exists; reprofleet init writes nothing over a file (move it away, "
                         "or run init in an empty folder)")
    check_inventory(files[INVENTORY].decode())
    written = []
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "xb") as out:  # "x": a file that appeared meanwhile is not overwritten either
            out.write(data)
        written.append(path)
    return written
