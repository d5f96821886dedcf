"""The simulated fleet's network: a bridge per run, a network namespace + veth per host.

Every host sits on its own /24 under 10.213.0.0/16 (root side .1, hosts .10, .11 ...), so
the controller in the root namespace reaches it like a machine on the lab LAN. Faults are
iptables rules inside the host's namespace, in two chains of our own so that a power cycle
can clear the wedge without clearing the link's packet loss (a property of the cable):

    INPUT  -> RFS-WEDGE (DROP everything while wedged) -> RFS-LOSS (random drop, -i eth0)
    OUTPUT -> RFS-WEDGE -> RFS-LOSS (random drop, -o eth0: loss the other way)
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from reprofleet.sim.procs import SimError, run, wait_until

SUPERNET = ipaddress.IPv4Network("10.213.0.0/16")
LOCK_PATH = Path("/run/reprofleet-sim/net.lock")
WEDGE_CHAIN = "RFS-WEDGE"
LOSS_CHAIN = "RFS-LOSS"
HOST_IF = "eth0"


def _ip(*args: str, timeout_s: float = 10.0, check: bool = True) -> str:
    return run(["ip", *args], timeout_s=timeout_s, check=check)


def link_names() -> set[str]:
    links = json.loads(_ip("-j", "link", "show") or "[]")
    return {link["ifname"] for link in links}


def netns_names() -> set[str]:
    text = _ip("netns", "list")
    return {line.split()[0] for line in text.splitlines() if line.strip()}


def used_subnets() -> set[ipaddress.IPv4Network]:
    """Every /24 of 10.213.0.0/16 that an address in the root namespace already touches."""
    used = set()
    for link in json.loads(_ip("-j", "addr", "show") or "[]"):
        for addr in link.get("addr_info", []):
            if addr.get("family") != "inet":
                continue
            network = ipaddress.IPv4Interface(f"{addr['local']}/{addr['prefixlen']}").network
            if network.overlaps(SUPERNET):
                used.add(ipaddress.IPv4Network(f"{addr['local']}/24", strict=False))
    return used


@contextmanager
def allocation_lock() -> Iterator[None]:
    """Serialise subnet choice + bridge creation between fleets started at the same time."""
    LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK_PATH, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def pick_subnet(seed: int) -> ipaddress.IPv4Network:
    """A free /24 under 10.213.0.0/16, starting from a run-dependent place (call under lock)."""
    used = used_subnets()
    subnets = list(SUPERNET.subnets(new_prefix=24))
    for offset in range(len(subnets)):
        candidate = subnets[(seed + offset) % len(subnets)]
        if candidate.network_address.packed[2] in (0, 255):
            continue
        if candidate not in used:
            return candidate
    raise SimError("no free /24 left under 10.213.0.0/16")


def uplink_of(bridge: str) -> str:
    """The name of the bridge's always-up port (``rfs<run>-br`` -> ``rfs<run>-up``)."""
    return bridge[:-3] + "-up" if bridge.endswith("-br") else bridge + "-up"


def create_bridge(name: str, gateway: ipaddress.IPv4Interface) -> None:
    """The lab switch. Its uplink is a port that is always up: a real controller is cabled
    to a switch, so a host that loses power takes its own port down, never the controller's
    carrier (a bridge whose only port is one host's veth would lose carrier with that host,
    and the partition guard would read that as our own network down)."""
    _ip("link", "add", "name", name, "type", "bridge")
    _ip("addr", "add", str(gateway), "dev", name)
    uplink = uplink_of(name)  # a veth pair (no dummy driver in every kernel): both ends up, one on the bridge
    _ip("link", "add", "name", uplink, "type", "veth", "peer", "name", uplink[:-3] + "-uq")
    _ip("link", "set", uplink[:-3] + "-uq", "up")
    _ip("link", "set", uplink, "master", name, "up")
    _ip("link", "set", name, "up")


def create_host_network(netns: str, veth: str, bridge: str, address: ipaddress.IPv4Interface) -> None:
    """Namespace + veth pair (root end on the bridge, eth0 inside) + our iptables chains."""
    _ip("netns", "add", netns)
    _ip("link", "add", veth, "type", "veth", "peer", "name", HOST_IF, "netns", netns)
    _ip("link", "set", veth, "master", bridge, "up")
    _ip("-n", netns, "link", "set", "lo", "up")
    _ip("-n", netns, "addr", "add", str(address), "dev", HOST_IF)  # link stays down: powered off
    iptables_restore(
        netns,
        [
            f":{WEDGE_CHAIN} - [0:0]",
            f":{LOSS_CHAIN} - [0:0]",
            f"-A INPUT -j {WEDGE_CHAIN}",
            f"-A INPUT -j {LOSS_CHAIN}",
            f"-A OUTPUT -j {WEDGE_CHAIN}",
            f"-A OUTPUT -j {LOSS_CHAIN}",
        ],
    )


def iptables_restore(netns: str, rules: list[str]) -> None:
    """Apply filter-table rules in one call (one process: wedges must land within ~100 ms)."""
    text = "*filter\n" + "".join(f"{rule}\n" for rule in rules) + "COMMIT\n"
    run(["ip", "netns", "exec", netns, "iptables-restore", "--noflush"], stdin=text, timeout_s=5.0)


def drop_everything(netns: str) -> None:
    """A hung host: no IP packet in or out (no RST, no ICMP) and no ARP answers either."""
    iptables_restore(netns, [f"-A {WEDGE_CHAIN} -j DROP"])
    _ip("-n", netns, "link", "set", HOST_IF, "arp", "off")


def clear_wedge(netns: str) -> None:
    iptables_restore(netns, [f"-F {WEDGE_CHAIN}"])


def set_loss(netns: str, fraction: float, outgoing: float = 0.0) -> None:
    """Drop ``fraction`` of the packets arriving at the host and ``outgoing`` of those it sends."""
    rules = [f"-F {LOSS_CHAIN}"]
    for direction, share in (("-i", fraction), ("-o", outgoing)):
        if share > 0:
            rules.append(
                f"-A {LOSS_CHAIN} {direction} {HOST_IF} -m statistic --mode random "
                f"--probability {min(share, 1.0):.5f} -j DROP"
            )
    iptables_restore(netns, rules)


def wedge_rules_present(netns: str) -> bool:
    text = run(["ip", "netns", "exec", netns, "iptables", "-S", WEDGE_CHAIN], timeout_s=5.0)
    return "-j DROP" in text


def set_host_link(netns: str, up: bool, gateway: str, address: str) -> None:
    """The host's own NIC: down while it has no power (no ARP, no RST: silence), up at boot.

    At boot the root namespace forgets a failed ARP entry for the host, so the first
    connection after power-on does not wait out the kernel's ARP retry timer.
    """
    _ip("-n", netns, "link", "set", HOST_IF, "up" if up else "down", "arp", "on")
    if up:
        _ip("-n", netns, "route", "replace", "default", "via", gateway)
        _ip("neigh", "flush", "to", address, check=False)


def set_link(name: str, up: bool) -> None:
    _ip("link", "set", name, "up" if up else "down")


def delete_netns(name: str) -> None:
    if name in netns_names():
        _ip("netns", "del", name, check=False)


def delete_link(name: str) -> None:
    if name in link_names():
        _ip("link", "del", name, check=False)


def wait_links_gone(names: list[str], timeout_s: float = 10.0) -> None:
    """`ip netns del` tears the veth down asynchronously: wait before anyone reuses the name."""
    wait_until(lambda: not (set(names) & link_names()), timeout_s, f"links {names} to vanish",
               interval_s=0.05)


def netns_pids(netns: str) -> list[int]:
    """PIDs of processes inside a named network namespace (for the stale sweep)."""
    text = _ip("netns", "pids", netns, check=False)
    return [int(p) for p in text.split() if p.isdigit()]


def running_as_root() -> bool:
    return os.geteuid() == 0
