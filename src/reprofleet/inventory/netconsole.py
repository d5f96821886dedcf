"""The inventory's ``netconsole:`` block: where a host's kernel sends its messages.

``netconsole: {port: 6666}`` is enough; ``dev`` (the host's interface), ``target`` (the
controller's address as the host sees it), ``extended`` and ``listen`` (the controller's own
address its receiver binds, default its address on the route to the host; never every
interface) are optional. ``true`` alone means every default. A mistake is one line naming
file:line:field, like ``pdu:``.
"""

from __future__ import annotations

import ipaddress
import re
from reprofleet.errors import InventoryError, Location
from reprofleet.model import NetconsoleSetting
from reprofleet.suggest import did_you_mean, line_of

from reprofleet.inventory.values import Sourced, as_int, as_text

KEYS = ("port", "dev", "target", "extended", "listen")
_IFNAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")  # IFNAMSIZ - 1, no slash or space


def netconsole_setting(item: Sourced) -> NetconsoleSetting | None:
    """The block as a setting; ``false``/absent is None (no netconsole on this host)."""
    block, where = item.value, item.where
    if block is True:
        block = {}
    if block is False or block is None:
        return None
    if not isinstance(block, dict):
        raise InventoryError(where, f"must be a mapping like {{port: 6666}}, got {block!r}")

    def at(key: str) -> Location:
        return Location(where.file, line_of(block, key) or where.line, f"netconsole.{key}")

    for key in block:
        if key not in KEYS:
            raise InventoryError(at(str(key)), f"unknown key {key!r} (known: {', '.join(KEYS)})"
                                               f"{did_you_mean(key, KEYS)}")
    port = as_int(block.get("port", 6666), at("port"), "a UDP port (1-65535)", low=1, high=65535)
    dev = as_text(Sourced(block["dev"], at("dev"))) if block.get("dev") is not None else None
    if dev is not None and not _IFNAME.match(dev):
        raise InventoryError(at("dev"), f"must be a network interface name (eth0, enp5s0), got {dev!r}")
    target = as_text(Sourced(block["target"], at("target"))) if block.get("target") is not None else None
    if target is not None:
        try:
            ipaddress.ip_address(target)
        except ValueError:
            raise InventoryError(at("target"), "must be an IP address (the kernel does not resolve names), "
                                               f"got {target!r}") from None
    listen = as_text(Sourced(block["listen"], at("listen"))) if block.get("listen") is not None else None
    if listen is not None:
        try:
            unspecified = ipaddress.IPv4Address(listen).is_unspecified
        except ValueError:
            raise InventoryError(at("listen"), "must be the controller's IPv4 address on the hosts' network, "
                                               f"got {listen!r}") from None
        if unspecified:
            raise InventoryError(at("listen"), "must be the controller's address on the hosts' network, not "
                                               "0.0.0.0 (every interface would take any sender's datagrams)")
    extended = block.get("extended", True)
    if not isinstance(extended, bool):
        raise InventoryError(at("extended"), f"must be true or false, got {extended!r}")
    return NetconsoleSetting(port=port, dev=dev, target=target, extended=extended, listen=listen,
                             where=str(Location(where.file, line_of(block) or where.line, "netconsole")))
