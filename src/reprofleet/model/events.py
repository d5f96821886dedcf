"""The names of the lines in a campaign's ``events.jsonl``.

Users, reports and resume read these files long after the controller that wrote them is
gone, so the names are a file format: each member's value is the exact string written in
the ``event`` key, and a rename here is a format change. Writers pass a member to
``CampaignContext.event``; readers turn a line back into a member with :func:`event_of`
and compare members, never spelled-out strings.
"""

from __future__ import annotations

from enum import Enum, unique
from typing import Any, Mapping


@unique
class CampaignEvent(str, Enum):
    """Every event a campaign writes, by the layer that writes it."""

    # the campaign
    TORN_LINE_CUT = "torn_line_cut"  # a killed controller's half-written line, cut at resume
    # a resume run with a changed playbook, PoC or inventory (--resume-changed): what changed, and
    # the cells whose identity it changed (their earlier records and stops no longer count for the plan)
    RESUME_CHANGED = "resume_changed"
    # preparing a host
    PREPARED = "prepared"
    NOT_READY = "not_ready"  # the host lacks what its plan needs (problems: one line each); no attempt runs
    UNREACHABLE_AT_START = "unreachable_at_start"
    SWITCHED_ON_AT_START = "switched_on_at_start"
    FACTS_CHANGED = "facts_changed"  # a new boot runs another kernel, driver, CUDA or VBIOS than the last one
    POWER_LOST = "power_lost"  # a silent host's power device read off before this controller acted: switched on
    BOOT_AWAITED = "boot_awaited"  # a host silent at the start: a boot this campaign started, or another holder, waited for
    POWER_ON_AT_EXIT = "power_on_at_exit"  # a second Ctrl-C: the outlets this controller left off, switched on before it exits
    LEASE_BROKEN = "lease_broken"
    LEASE_RELEASE_FAILED = "lease_release_failed"
    FENCED = "fenced"  # another controller took the host's lease: this controller stops using the host
    ORPHAN_KILLED = "orphan_killed"
    RUNTIME_RESOLVED = "runtime_resolved"
    CACHE_PUSHED = "cache_pushed"
    # the lab's scheduler (runner/slurm_node.py): the node taken (drained with this campaign's reason),
    # its running jobs waited for, set down on a wedge, drained again once healthy, given back at the end
    SLURM_TAKEN = "slurm_taken"
    SLURM_JOBS_WAITING = "slurm_jobs_waiting"  # jobs run on the node: no attempt starts until they end
    SLURM_JOBS_ENDED = "slurm_jobs_ended"
    SLURM_DOWN = "slurm_down"  # a wedge (or a silence) declared: the node down with a reason people read
    SLURM_GIVEN_BACK = "slurm_given_back"  # resumed: the nodes this campaign drained; left: the others, and why
    SLURM_ERROR = "slurm_error"  # a node change Slurm refused (the campaign goes on; the event says what)
    # policy, kernel settings and netconsole
    POLICY_APPLIED = "policy_applied"
    POLICY_RESTORED = "policy_restored"
    POLICY_RESTORE_FAILED = "policy_restore_failed"
    POLICY_CHANGED = "policy_changed"  # the card no longer reads what was applied (a by-hand change): re-applied
    HOST_DEBUG_APPLIED = "host_debug_applied"
    HOST_DEBUG_RESTORED = "host_debug_restored"
    HOST_DEBUG_RESTORE_FAILED = "host_debug_restore_failed"
    NETCONSOLE_APPLIED = "netconsole_applied"
    NETCONSOLE_FAILED = "netconsole_failed"
    NETCONSOLE_RESTORED = "netconsole_restored"
    NETCONSOLE_RESTORE_FAILED = "netconsole_restore_failed"
    # attempts and their ends
    ATTEMPT_STARTED = "attempt_started"
    ATTEMPT_RESUMED = "attempt_resumed"  # started by a controller that died, recorded by this one (status)
    ATTEMPT_KILLED = "attempt_killed"  # ended without the PoC's own exit: killed, best effort (why, ok)
    START_REFUSED = "start_refused"  # the agent would not start it: another attempt was alive (slot: not run)
    STOPPED = "stopped"  # a cell's stop rule (or a moved image tag) ended it on a host
    QUARANTINED = "quarantined"
    UNREACHABLE = "unreachable"
    REBOOT = "reboot"
    WEDGE = "wedge"
    CUT_BY_NEIGHBOUR = "cut_by_neighbour"  # a shared outlet went off with another host's cycle (attempt: infra)
    # a search or bisection (runner/search.py)
    SEARCH_PROBE = "search_probe"  # the ladder chose a host's next level (host, level, cell, index, why)
    SEARCH_DONE = "search_done"  # every host left the ladder: the result as the model computed it
    # liveness (the watchdogs and the partition guard)
    SUSPECT = "suspect"
    PROBE = "probe"
    CLEAR = "clear"
    GUARD = "guard"
    SILENCE_HOLD = "silence_hold"  # silent with other hosts: verdict and power held (rule, why, peers)
    SILENCE_RELEASE = "silence_release"  # the hold let go (rule: witness | peer | vouched | lone | outlasted; why)
    REATTACH_FAILED = "reattach_failed"  # the stream could not be re-attached after silence
    CONTROLLER_NETWORK_SUSPECT = "controller_network_suspect"
    CONTROLLER_NETWORK_BACK = "controller_network_back"
    ICMP_UNAVAILABLE = "icmp_unavailable"
    # recovery
    RECOVERY = "recovery"  # one state transition of the recovery sequence
    SELF_RESET_GRACE = "self_reset_grace"  # how long a silent host is given to reset itself, and why (its facts)
    POWER_RETRY = "power_retry"
    NEEDS_PERSON = "needs_person"
    WARNING = "warning"
    # telling people (campaign/notify.py)
    NOTIFY_FAILED = "notify_failed"  # a notification could not be sent (kind, why); the campaign goes on


def event_of(line: Mapping[str, Any]) -> CampaignEvent | None:
    """The event a line of ``events.jsonl`` is; None for a name this controller does not know
    (a newer controller's line, or a hand-written one), which readers skip."""
    try:
        return CampaignEvent(line.get("event"))
    except ValueError:
        return None
