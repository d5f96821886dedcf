"""``invoke doctor`` on Slurm nodes (``-i slurm:...``): what the campaign needs of the scheduler.

A campaign drains, downs and resumes its nodes (runner/slurm_node.py), so before the first
night the doctor says, per host: whether slurmctld answers and munge encodes a credential;
whether this user may change nodes (root and SlurmUser always may; others need AdminLevel
Operator or Administrator in slurmdbd: without slurmdbd nobody else can); the node's state and
reason (someone else's drain means the campaign will not take it; a ``reprofleet:`` reason of
another campaign means that one left it); the jobs running on it (the campaign waits for them);
the reason prefix the campaign will write; and whether the cluster lets a node be power-cycled
through Slurm (``scontrol reboot`` with ``reboot_from_controller`` and a RebootProgram): missing
for a host whose ``pdu:`` names ``driver: slurm`` when it does not, said for every other node.

:func:`slurm_checks` decides from :class:`SlurmEvidence`, gathered once for all hosts by
:func:`gather`, so the decisions are tested on the golden output of a real Slurm. ``doctor.py``
turns each :class:`SlurmCheck` into one of its own items (this module imports nothing of it).
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, field
from enum import Enum, unique
from typing import Callable, Mapping, Sequence, TypeVar

from reprofleet.errors import SchedulerError
from reprofleet.inventory import SLURM_VARIABLE
from reprofleet.model import Host
from reprofleet.runner.slurm_node import SLURM_POWER
from reprofleet.scheduler import REASON_PREFIX, RebootSupport, SlurmClient, SlurmJob, SlurmNode, reboot_support
from reprofleet.scheduler.client import munge_socket

__all__ = ["SlurmCheck", "SlurmEvidence", "gather", "slurm_checks"]

OPERATOR_LEVELS = ("operator", "administrator")
T = TypeVar("T")


@unique
class Status(str, Enum):
    """The doctor's words (campaign/doctor.py's Status has the same values)."""

    OK = "ok"
    MISSING = "missing"
    WARN = "warn"


@dataclass(frozen=True)
class SlurmCheck:
    """One Slurm item of a host: what was found and, when it is not ok, the fix."""

    item: str
    status: Status
    found: str
    fix: str = ""


@dataclass(frozen=True)
class SlurmEvidence:
    """What Slurm said, once for every host of the inventory."""

    controller: str | None  # `scontrol ping`'s line; None: the error says why
    controller_error: str | None = None
    munge: str | None = None
    munge_error: str | None = None
    user: str = ""
    uid: int = -1
    slurm_user: str = ""  # SlurmUser from `scontrol show config`, e.g. "root(0)"
    admin_level: str | None = None  # from sacctmgr; None: it could not tell (no slurmdbd)
    nodes: Mapping[str, SlurmNode] = field(default_factory=dict)
    jobs: Mapping[str, tuple[SlurmJob, ...]] = field(default_factory=dict)
    nodes_error: str | None = None
    reboot: RebootSupport | None = None  # from `scontrol show config`; None: it could not be read


def gather(client: SlurmClient, hosts: Sequence[Host], user: str | None = None, uid: int | None = None) -> SlurmEvidence:
    """Ask Slurm what :func:`slurm_checks` judges; changes nothing."""
    user = user if user is not None else getpass.getuser()
    uid = uid if uid is not None else os.getuid()
    try:
        controller, controller_error = client.ping(), None
    except SchedulerError as exc:
        return SlurmEvidence(None, str(exc), user=user, uid=uid)
    config = _quiet(client.config) or {}
    munge, munge_error = _answer(lambda: client.munge(munge_socket(config)))
    try:
        nodes = {node.name: node for node in client.nodes()}
        names = [str(h.vars[SLURM_VARIABLE]) for h in hosts if SLURM_VARIABLE in h.vars]
        jobs = {name: client.jobs_on(name) for name in names if name in nodes}
        nodes_error = None
    except SchedulerError as exc:
        nodes, jobs, nodes_error = {}, {}, str(exc)
    return SlurmEvidence(controller, controller_error, munge, munge_error, user, uid, config.get("SlurmUser", ""),
                         _quiet(lambda: client.admin_level(user)), nodes, jobs, nodes_error,
                         reboot_support(config) if config else None)


def _quiet(ask: Callable[[], T]) -> T | None:
    try:
        return ask()
    except SchedulerError:
        return None


def _answer(ask: Callable[[], str]) -> tuple[str | None, str | None]:
    try:
        return ask(), None
    except SchedulerError as exc:
        return None, str(exc)


def slurm_checks(host: Host, evidence: SlurmEvidence) -> list[SlurmCheck]:
    """The Slurm items of one host (none for a host that is no Slurm node)."""
    node_name = host.vars.get(SLURM_VARIABLE)
    if not isinstance(node_name, str):
        return []
    if evidence.controller is None:
        return [SlurmCheck("slurm", Status.MISSING, evidence.controller_error or "no answer",
                      "start slurmctld and munge; `scontrol ping` must say UP")]
    checks = [SlurmCheck("slurm", Status.OK, evidence.controller), _munge(evidence), _rights(evidence)]
    checks.append(_node(node_name, evidence))
    checks.append(_jobs(node_name, evidence))
    checks.append(_reboot(host, evidence))
    return checks


def _munge(evidence: SlurmEvidence) -> SlurmCheck:
    if evidence.munge is not None:
        return SlurmCheck("munge", Status.OK, evidence.munge)
    return SlurmCheck("munge", Status.MISSING, evidence.munge_error or "no answer",
                 "start munged (systemctl start munge) with the cluster's key")


def _rights(evidence: SlurmEvidence) -> SlurmCheck:
    """Who may drain and resume: root, SlurmUser, or AdminLevel Operator/Administrator."""
    slurm_user = evidence.slurm_user.split("(", 1)[0]
    if evidence.uid == 0 or (slurm_user and evidence.user == slurm_user):
        return SlurmCheck("slurm rights", Status.OK, f"{evidence.user}: Slurm's own administrator (root or SlurmUser)")
    level = evidence.admin_level
    if level is not None and level.lower() in OPERATOR_LEVELS:
        return SlurmCheck("slurm rights", Status.OK, f"{evidence.user}: AdminLevel {level}")
    found = f"{evidence.user}: AdminLevel {level}" if level is not None else \
        f"{evidence.user}: not root nor SlurmUser ({slurm_user or '?'}), and sacctmgr cannot tell (no slurmdbd)"
    return SlurmCheck("slurm rights", Status.MISSING, found + ": Slurm refuses its drain (\"Invalid user id\")",
                 f"sacctmgr modify user {evidence.user} set adminlevel=operator (needs slurmdbd), or run the "
                 "controller as SlurmUser")


def _node(name: str, evidence: SlurmEvidence) -> SlurmCheck:
    node = evidence.nodes.get(name)
    if node is None:
        return SlurmCheck("slurm node", Status.MISSING, evidence.nodes_error or f"Slurm has no node {name!r}",
                     "check slurm_node / the slurm: selection")
    prefix = f"reason prefix {REASON_PREFIX}<campaign>"
    if node.reason.startswith(REASON_PREFIX):
        return SlurmCheck("slurm node", Status.WARN, f"{name} {node.state_words}: {node.reason!r} (a campaign left it)",
                     f"--resume that campaign, or `scontrol update nodename={name} state=resume`")
    if node.held_by_someone:
        return SlurmCheck("slurm node", Status.MISSING,
                     f"{name} {node.state_words} by {node.reason_by or 'someone'}: {node.reason or 'no reason'!r}; "
                     "the campaign does not take a node someone else took",
                     f"ask whoever drained it; then `scontrol update nodename={name} state=resume`")
    return SlurmCheck("slurm node", Status.OK, f"{name} {node.state_words}; the campaign drains it with {prefix}")


def _jobs(name: str, evidence: SlurmEvidence) -> SlurmCheck:
    jobs = evidence.jobs.get(name, ())
    if not jobs:
        return SlurmCheck("slurm jobs", Status.OK, f"none on {name}")
    return SlurmCheck("slurm jobs", Status.WARN, f"{len(jobs)} on {name}: " + ", ".join(j.words() for j in jobs[:5]),
                 "the campaign drains the node and waits for them (up to its job wait) before the first attempt")


def _reboot(host: Host, evidence: SlurmEvidence) -> SlurmCheck:
    """Can this host be power-cycled through Slurm? Missing only where its pdu says it will be."""
    through_slurm = any(port.driver == SLURM_POWER for port in (*host.power_ports, *(
        p for level in host.power_fallbacks for p in level)))
    support = evidence.reboot
    if support is None:
        return SlurmCheck("slurm reboot", Status.MISSING if through_slurm else Status.WARN,
                          "scontrol show config could not be read", "check `scontrol show config` as this user")
    if support.allowed:
        return SlurmCheck("slurm reboot", Status.OK, "the cluster allows scontrol reboot from the controller "
                          f"(RebootProgram {support.program})" + ("; this host cycles through it" if through_slurm
                                                                  else "; pdu: {driver: slurm} may use it"))
    if through_slurm:
        return SlurmCheck("slurm reboot", Status.MISSING, "pdu driver slurm, but the cluster cannot reboot a "
                          "hard-locked node from the controller", support.why_not)
    return SlurmCheck("slurm reboot", Status.OK, "the cluster does not allow scontrol reboot from the controller "
                      "(this host's power goes through its own pdu)")
