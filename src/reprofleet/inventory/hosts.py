"""Precedence of variables and the Host built from them: connection settings, GPU and PDU.

Variables merge in Ansible's default order, so a host gets the settings an Ansible run
would give it; then the few we use are checked and turned into a ``Host``. Secrets
never sit in the inventory: a PDU names them by reference (``env:VAR``, ``file:/path``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from reprofleet.credentials import name_credential_variables
from reprofleet.errors import InventoryError, Location
from reprofleet.model import CredentialRef, Host, PowerPort, frozen_mapping
from reprofleet.suggest import did_you_mean, line_of, plain

from reprofleet.inventory.graph import Graph, check_name
from reprofleet.inventory.login import check_login_value
from reprofleet.inventory.gpu_access import VARIABLE as GPU_ACCESS_VARIABLE, gpu_access
from reprofleet.inventory.netconsole import netconsole_setting
from reprofleet.inventory.recovery import VARIABLE as RECOVERY_VARIABLE, WAIT_VARIABLE, nmi_reboot_wait, recovery_ladder
from reprofleet.inventory.values import Sourced, as_int, as_text
from reprofleet.inventory.vars_files import VarsFiles

# Later names win, as in Ansible's ssh connection plugin option definitions.
ADDRESS_VARS = ("ansible_host", "ansible_ssh_host")
PORT_VARS = ("ansible_port", "ansible_ssh_port")
USER_VARS = ("ansible_user", "ansible_ssh_user")
KEY_FILE_VARS = ("ansible_private_key_file", "ansible_ssh_private_key_file")
PDU_SECRET_KEYS = frozenset(
    {"password", "passwd", "pass", "secret", "token", "api_key", "apikey", "community",
     "auth_key", "priv_key", "auth_password", "priv_password"}
)


@dataclass(frozen=True)
class Inventory:
    """Hosts to run on, group membership (transitive, including ``all``), and where from.

    ``hosts`` are in the order Ansible runs and lists them (that of ``all``), and each group's
    members in the order Ansible lists that group (``order.group_hosts``): subscripts such as
    ``lab[0]`` pick by it. ``declared`` names the hosts in the order the source first named
    them, the order Ansible matches a glob or regex against host names (empty: ``hosts``' order).
    ``warnings`` carries what Ansible would only warn about (an unexpected key in a YAML
    group, a vault-encrypted vars file we cannot read), for the command line to print.
    """

    hosts: tuple[Host, ...]
    groups: Mapping[str, tuple[str, ...]]
    source: str
    warnings: tuple[str, ...] = ()
    declared: tuple[str, ...] = ()

    def host(self, name: str) -> Host:
        """The host called ``name``; KeyError naming the known ones otherwise."""
        for host in self.hosts:
            if host.name == name:
                return host
        raise KeyError(f"no host {name!r} in {self.source}{did_you_mean(name, self.names)}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(host.name for host in self.hosts)

    @property
    def declared_names(self) -> tuple[str, ...]:
        """Host names in the order the source first named them (see the class text)."""
        return self.declared or self.names


def inventory_from_graph(graph: Graph, files: VarsFiles, source: str) -> Inventory:
    if not graph.hosts:
        raise InventoryError(Location(source, 1, "hosts"), "the inventory has no hosts")
    depth = graph.depths()
    members = graph.members()
    hosts = []
    for name in members["all"]:  # the order Ansible runs and lists them, not the file's
        groups = graph.ancestors(name)
        hosts.append(host_from_vars(name, _host_layers(graph, files, name, groups, depth), groups,
                                    graph.hosts[name].where or Location(source)))
    return Inventory(
        hosts=tuple(hosts),
        groups=frozen_mapping(members),
        source=source,
        warnings=tuple(graph.warnings + files.warnings),
        declared=tuple(graph.hosts),
    )


def _host_layers(
    graph: Graph, files: VarsFiles, host: str, groups: set[str], depth: Mapping[str, int]
) -> dict[str, Sourced]:
    """Ansible's default order: all < groups (shallow first) < group_vars files alike < host < host_vars."""
    ordered = sorted(
        (graph.groups[g] for g in groups if g != "all"), key=lambda g: (depth[g.name], g.priority, g.name)
    )
    merged: dict[str, Sourced] = dict(graph.groups["all"].vars)
    for group in ordered:
        merged.update(group.vars)
    for name in ["all", *(g.name for g in ordered)]:
        merged.update(files.vars("group_vars", name))
    merged.update(graph.hosts[host].vars)
    merged.update(files.vars("host_vars", host))
    return merged


def host_from_vars(name: str, merged: Mapping[str, Sourced], groups: Iterable[str],
                   name_where: Location | None = None) -> Host:
    """Connection settings, GPU and PDU of one host from its merged variables."""
    check_name(name, "host name", name_where or Location("(inventory)"))
    address = _last(merged, ADDRESS_VARS)
    port = _last(merged, PORT_VARS)
    user = _last(merged, USER_VARS)
    login = _login_values(name, address, user, name_where)
    key_file = _last(merged, KEY_FILE_VARS)
    python = _last(merged, ("ansible_python_interpreter",))
    gpu = _last(merged, ("gpu_index",))
    pdu = _last(merged, ("pdu",))
    levels = power_levels(pdu.value, pdu.where) if pdu else ()
    ports = levels[0] if levels else ()
    netconsole = _last(merged, ("netconsole",))
    ladder = _last(merged, (RECOVERY_VARIABLE,))
    return Host(
        name=name,
        address=login[0],
        port=_port(port) if port else 22,
        user=login[1],
        key_file=as_text(key_file) if key_file else None,
        python=_interpreter(python) if python else "python3",
        gpu_index=as_int(gpu.value, gpu.where, "a GPU index (0-255)", low=0, high=255) if gpu else 0,
        pdu=ports[0] if ports else None,
        groups=tuple(sorted(g for g in groups if g != "all")),
        vars=frozen_mapping({key: plain(item.value) for key, item in merged.items()}),
        more_pdus=tuple(ports[1:]),
        power_fallbacks=tuple(levels[1:]),
        netconsole=netconsole_setting(netconsole) if netconsole else None,
        gpu_access=gpu_access(_last(merged, (GPU_ACCESS_VARIABLE,))),
        recovery=recovery_ladder(ladder),
        recovery_where=str(ladder.where) if ladder else "",
        nmi_reboot_s=nmi_reboot_wait(_last(merged, (WAIT_VARIABLE,))),
    )


def _login_values(name: str, address: Sourced | None, user: Sourced | None,
                  name_where: Location | None) -> tuple[str, str | None]:
    """(address, user), each checked to be data and never an ssh option; the name is checked too."""
    check_login_value(name, name_where or Location("inventory", None, "host name"), "the host name")
    checked_address = check_login_value(as_text(address), address.where, "the address") if address else name
    checked_user = check_login_value(as_text(user), user.where, "the user") if user else None
    return checked_address, checked_user


def _last(merged: Mapping[str, Sourced], names: tuple[str, ...]) -> Sourced | None:
    present = [merged[n] for n in names if n in merged and merged[n].value is not None]
    return present[-1] if present else None


def _port(item: Sourced) -> int:
    return as_int(item.value, item.where, "a port number (1-65535)", low=1, high=65535)


def _interpreter(item: Sourced) -> str:
    value = as_text(item)
    return "python3" if value.startswith("auto") else value  # Ansible's discovery modes


FALLBACK_KEY = "fallback"
# drivers whose device is found without an address: ``slurm`` asks the cluster scontrol finds (SLURM_CONF)
IMPLIED_ADDRESS = {"slurm": "slurmctld"}
PDU_BLOCK_KEYS = ("driver", "address", "outlet", "credentials", "shared", "outlets", FALLBACK_KEY)


def power_levels(pdu: Any, where: Location) -> tuple[tuple[PowerPort, ...], ...]:
    """The host's power devices in the order they are tried: the ``pdu:`` block's own outlets, then
    each item of its ``fallback:`` list (each its own device, with its own outlet or ``outlets:``).

    ``outlets:`` and ``fallback:`` are different things on purpose: every outlet of ``outlets:``
    is switched (a host with two supplies is only off when both are); a ``fallback:`` device is
    used only when the one before it cannot verify its action (Pacemaker's fencing levels). A
    fallback item shares nothing with the block above it: it is another device.
    """
    if not isinstance(pdu, dict) or FALLBACK_KEY not in pdu:
        return (power_ports(pdu, where),)
    items = pdu[FALLBACK_KEY]
    at = Location(where.file, line_of(pdu, FALLBACK_KEY) or where.line, f"pdu.{FALLBACK_KEY}")
    if not isinstance(items, list) or not items:
        raise InventoryError(at, "must be a list of pdu blocks (driver, address, outlet ...), tried in order")
    levels = [power_ports(pdu, where)]  # its fallback key is no option of the first device
    for index, item in enumerate(items):
        item_at = Location(where.file, line_of(items, index) or at.line, f"pdu.{FALLBACK_KEY}[{index}]")
        if isinstance(item, dict) and FALLBACK_KEY in item:
            raise InventoryError(item_at, "a fallback device has no fallback of its own: list every device, "
                                          "in order, under the first block's fallback")
        levels.append(power_ports(item, item_at))
    return tuple(levels)


def power_ports(pdu: Any, where: Location) -> tuple[PowerPort, ...]:
    """Every outlet of a ``pdu:`` block: one, or one per item of ``outlets:`` (two power supplies).

    An item of ``outlets:`` is an outlet (``[7, 8]``) or a mapping of keys that differ from
    the block (``[{outlet: 7}, {address: 10.0.0.51, outlet: 2}]``): a host whose second
    supply hangs on another PDU is only off when both are.
    """
    if not isinstance(pdu, dict) or "outlets" not in pdu:
        return (power_port(pdu, where),)
    items = pdu["outlets"]
    field = f"{where.field}.outlets" if (where.field or "").startswith(f"pdu.{FALLBACK_KEY}") else "pdu.outlets"
    at = Location(where.file, line_of(pdu, "outlets") or where.line, field)
    if not isinstance(items, list) or not items:
        raise InventoryError(at, "must be a list of outlets (or of mappings with outlet, address ...)")
    if "outlet" in pdu:
        raise InventoryError(at, "give either outlet or outlets, not both")
    base = {k: v for k, v in pdu.items() if k != "outlets"}
    ports = []
    for index, item in enumerate(items):
        block = {**base, **item} if isinstance(item, dict) else {**base, "outlet": item}
        ports.append(power_port(block, Location(where.file, line_of(items, index) or at.line, field)))
    return tuple(ports)


def _address_has_credentials(address: str) -> bool:
    """``http://user:pw@host`` or ``user@host``: a secret (or half of one) in the address."""
    rest = address.split("://", 1)[1] if "://" in address else address
    return "@" in rest.split("/", 1)[0]


def _address_has_query(address: str) -> bool:
    """``http://pdu/?user=admin&password=...`` or ``pdu#x``: a query or fragment, where secrets hide."""
    return "?" in address or "#" in address


def power_port(pdu: Any, where: Location) -> PowerPort:
    """The ``pdu:`` block of a host: driver and address required, secrets only by reference."""
    if not isinstance(pdu, dict):
        raise InventoryError(where, "must be a mapping with driver, address, outlet, credentials")
    block = where.field if where.field and where.field.startswith(f"pdu.{FALLBACK_KEY}") else "pdu"

    def at(key: str) -> Location:
        return Location(where.file, line_of(pdu, key) or where.line, f"{block}.{key}")

    for key in pdu:
        if str(key).lower() in PDU_SECRET_KEYS:  # never echo the value: it is a secret
            raise InventoryError(
                at(key), "secrets never go into the inventory: use 'credentials: env:VAR' or 'file:/path'"
            )
    for key in ("driver", "address"):
        if key not in pdu and not (key == "address" and pdu.get("driver") in IMPLIED_ADDRESS):
            raise InventoryError(where, f"pdu needs '{key}'")
    outlet = pdu.get("outlet")
    if isinstance(outlet, bool) or not isinstance(outlet, (str, int, type(None))):
        raise InventoryError(at("outlet"), f"must be an outlet name or number, got {outlet!r}")
    address = as_text(Sourced(pdu.get("address", IMPLIED_ADDRESS.get(str(pdu.get("driver")), "")), at("address")))
    if _address_has_credentials(address):  # never echo it: the part before @ is a secret
        raise InventoryError(at("address"), "the address carries credentials (user:password@): they would "
                             "reach logs and events; use 'credentials: env:VAR' or 'file:/path'")
    if _address_has_query(address):  # never echo it: ?password=... is a secret
        raise InventoryError(at("address"), "the address has a query string or fragment (?... or #...): it would "
                             "reach logs and events, and a password there is logged verbatim; give the plain "
                             "address and 'credentials: env:VAR' or 'file:/path'")
    shared = pdu.get("shared", False)
    if not isinstance(shared, bool):
        raise InventoryError(at("shared"), f"must be true or false, got {shared!r}")
    credentials = pdu.get("credentials")
    return PowerPort(
        driver=as_text(Sourced(pdu["driver"], at("driver"))),
        address=address,
        outlet=None if outlet is None else str(outlet),
        credentials=None if credentials is None else credential_ref(credentials, at("credentials")),
        options=frozen_mapping({k: plain(v) for k, v in pdu.items() if k not in PDU_BLOCK_KEYS}),
        shared=shared,
        where=str(Location(where.file, line_of(pdu, "driver") or where.line, block)),
    )


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def credential_ref(value: Any, where: Location) -> CredentialRef:
    """``env:VAR`` or ``file:/path``; the message never repeats the value (it may be a secret)."""
    scheme, _, name = value.partition(":") if isinstance(value, str) else ("", "", "")
    if scheme == "env" and _ENV_NAME.match(name):
        name_credential_variables([name])  # no child process of the controller inherits it
        return CredentialRef("env", name, str(where))
    if scheme == "file" and name:
        return CredentialRef("file", name, str(where))
    if scheme in ("env", "file"):
        raise InventoryError(where, f"'{scheme}:' needs a {'variable name' if scheme == 'env' else 'path'}")
    known = f"unknown scheme {scheme!r}" if name and scheme.isalpha() and len(scheme) < 12 else "not a reference"
    raise InventoryError(where, f"{known}: credentials are 'env:VAR' or 'file:/path'")
