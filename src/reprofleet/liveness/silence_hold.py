"""Correlated silence: several hosts fall silent at once. A freeze, or their switch?

The partition guard's witnesses sit on the controller's side (its carrier, its gateway, any
answer from a PDU or BMC). A top-of-rack switch reboot or an STP reconvergence silences every
host behind it at once while the PDU still answers, and reads to the guard as "every host
froze" (tried: a 45 s outage declared three healthy hosts wedged and cut their power). Hosts
of one campaign also really can freeze together (they run the same PoC in near lockstep), so
correlated silence is not ignored either: it needs stronger evidence before anything is
declared or switched.

A host whose silence began within ``window_s`` of another's is *held* (no declaration, no
power action) until one of these lets go, named in the events:

- ``witness``: a hosts-side witness of the host answers (an inventory ``witness:``: the
  switch's management address, a machine on the same segment that is not under test);
- ``peer``: another host of the same segment was heard after this one fell silent (one host
  still answering shows the segment works);
- ``vouched``: the host's last rounds were all DEAD while a host of the same segment answered
  (its stream, or its own probes got its kernel or sshd): the segment worked, the silence is
  this host's (:mod:`peer_evidence`);
- ``outlasted``: the silence outlasted ``hold_s`` (``correlated_hold_s``, by default long
  enough for a switch reboot).

A lone freeze (no other host silent within the window) is never held: it keeps its ~3 s path.
A host's *segment* is its ``segment:`` inventory var; without one, the /24 (IPv4) or /64
(IPv6) its address is in, since hosts that share a subnet usually share the switch.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from enum import Enum, unique
from typing import Callable, Mapping, Sequence

from reprofleet.model import Host


@unique
class HoldRule(str, Enum):
    LONE = "lone"  # no other host fell silent with it: not held
    WITNESS = "witness"  # a hosts-side witness answers: the segment works
    PEER = "peer"  # a host of the same segment was heard after the silence began
    VOUCHED = "vouched"  # its last rounds were DEAD while a host of the same segment answered
    OUTLASTED = "outlasted"  # the silence outlasted correlated_hold_s
    CORRELATED = "correlated"  # held: silent with others, nothing yet shows the segment works


@dataclass(frozen=True)
class SilenceHold:
    """Whether to hold back a host's verdict (and any power action), by which rule, and why."""

    holding: bool
    rule: HoldRule
    why: str
    peers: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"rule": self.rule.value, "why": self.why, **({"peers": list(self.peers)} if self.peers else {})}


def segment_of(host: Host, resolved: str | None = None) -> str:
    """The host's ``segment:`` var, else its address's /24 (IPv4) or /64 (IPv6), else its name."""
    named = host.vars.get("segment")
    if named is not None and str(named).strip():
        return f"segment {named}"
    for text in (resolved, host.address):
        try:
            address = ipaddress.ip_address(str(text))
        except ValueError:
            continue
        prefix = 24 if address.version == 4 else 64
        return f"subnet {ipaddress.ip_network(f'{address}/{prefix}', strict=False)}"
    return f"host {host.name}"


def judge_silence(host: str, now: float, silent_since: Mapping[str, float], heard_at: Mapping[str, float],
                  segments: Mapping[str, str], *, window_s: float, hold_s: float,
                  witness: bool | None, vouched_by: str | None = None) -> SilenceHold:
    """The hold for ``host`` now, from who fell silent when and who was heard since.

    ``silent_since``: hosts silent now, with the time their silence began; ``heard_at``: when
    each host was last heard; ``witness``: whether the host's hosts-side witness answers (None:
    it has none, or no fresh answer yet); ``vouched_by``: the peer that answered while each of the
    host's last rounds went unanswered (None: no such proof).
    """
    began = silent_since.get(host)
    if began is None:
        return SilenceHold(False, HoldRule.LONE, "not silent")
    peers = tuple(sorted(h for h, t in silent_since.items() if h != host and abs(t - began) <= window_s))
    if not peers:
        return SilenceHold(False, HoldRule.LONE, f"no other host fell silent within {window_s:g} s")
    if witness:
        return SilenceHold(False, HoldRule.WITNESS, "its hosts-side witness answers: the segment works", peers)
    segment = segments.get(host)
    answering = sorted(h for h, t in heard_at.items()
                       if h != host and h not in silent_since and segments.get(h) == segment and t > began)
    if answering:
        return SilenceHold(False, HoldRule.PEER, f"{answering[0]} on the same {segment} still answers", peers)
    if vouched_by is not None:
        return SilenceHold(False, HoldRule.VOUCHED, f"its last rounds got nothing while {vouched_by} on the same "
                           f"{segment} answered: this host is silent, not the network", peers)
    start = min([began, *(silent_since[p] for p in peers)])
    if now - start >= hold_s:
        return SilenceHold(False, HoldRule.OUTLASTED,
                           f"the silence of {len(peers) + 1} hosts outlasted correlated_hold_s ({hold_s:g} s)", peers)
    return SilenceHold(True, HoldRule.CORRELATED,
                       f"{len(peers) + 1} hosts fell silent within {window_s:g} s ({', '.join((host, *peers))}) and "
                       f"nothing on their side answers: a switch outage looks the same; holding up to {hold_s:g} s",
                       peers)


def segments_of(hosts: Sequence[Host], resolve: Callable[[str], str] | None = None) -> dict[str, str]:
    """Every host's segment (``resolve``: a name -> address function, to place named hosts; a
    name it cannot resolve is returned as it is, and the host is its own segment)."""
    return {host.name: segment_of(host, resolve(host.address) if resolve else None) for host in hosts}
