"""A host's netconsole through a campaign: configured before its attempts (again in every
new boot: a reboot forgets it), its lines followed into each attempt's stream, the last of
them in a wedge's record, and the host's own configuration back at the end.

netconsole is an observation, not a factor: a host whose kernel cannot be configured runs
its attempts anyway (an event says why its records carry no network lines).
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from reprofleet.remote.agent import AgentClient
from reprofleet.errors import ReprofleetError
from reprofleet.model import Host, NetconsoleSetting, Outcome, Record
from reprofleet.remote.netconsole import NetconsoleReceiver
from reprofleet.model.events import CampaignEvent

if TYPE_CHECKING:
    from reprofleet.runner.host import HostRunner

FREEZE_OUTCOMES = (Outcome.WEDGE, Outcome.REBOOT)


def start_receiver(hosts: Sequence[Host], folder: Path) -> NetconsoleReceiver | None:
    """One receiver for the campaign when any host has ``netconsole:``; None otherwise."""
    chosen = [host for host in hosts if host.netconsole is not None]
    if not chosen:
        return None
    sources: dict[str, str] = {}
    for host in chosen:
        try:
            sources[socket.gethostbyname(host.address)] = host.name
        except OSError:
            sources[host.address] = host.name  # its kernel's source address is added at apply
    return NetconsoleReceiver({h.netconsole.port for h in chosen if h.netconsole}, sources, folder).start()


def _receiver(runner: "HostRunner") -> NetconsoleReceiver | None:
    """The campaign's receiver, when this host sends to it."""
    return runner.ctx.netconsole if runner.host.netconsole else None


def wanted(setting: NetconsoleSetting) -> dict[str, Any]:
    return {"port": setting.port, "dev": setting.dev, "target": setting.target, "extended": setting.extended}


def ensure(runner: "HostRunner", agent: AgentClient) -> None:
    """The host's kernel sends to us in this boot (applied once per boot); the attempt about to
    start counts its kernel lines from here."""
    receiver, setting = _receiver(runner), runner.host.netconsole
    if receiver is None or setting is None:
        return
    name = runner.host.name
    receiver.attempt_started[name] = time.time()  # this attempt's lines count from here
    if name in receiver.configured and receiver.configured[name] == runner.state.boot_id:
        return
    receiver.configured[name] = runner.state.boot_id
    try:
        report = agent.netconsole(["apply", "--json", json.dumps(wanted(setting))])
    except ReprofleetError as exc:
        runner.ctx.event(name, CampaignEvent.NETCONSOLE_FAILED, error=str(exc))
        return
    config: Mapping[str, Any] = report.config or {}
    if config.get("local_ip"):
        receiver.add_source(str(config["local_ip"]), name)
    if report.ok:
        runner.ctx.event(name, CampaignEvent.NETCONSOLE_APPLIED, config=dict(config), printk=report.printk,
                         notes=list(report.notes))
    else:
        runner.ctx.event(name, CampaignEvent.NETCONSOLE_FAILED, error="; ".join(map(str, report.errors)),
                         notes=list(report.notes))


def follow(runner: "HostRunner", attempt_id: str, write: Any) -> None:
    """From now on the host's kernel lines also go into this attempt's stream."""
    receiver = _receiver(runner)
    if receiver is not None:
        since = receiver.attempt_started.setdefault(runner.host.name, time.time())
        receiver.follow(runner.host.name, attempt_id, write, since)


def unfollow(runner: "HostRunner") -> None:
    receiver = _receiver(runner)
    if receiver is not None:
        receiver.unfollow(runner.host.name)


def record_lines(runner: "HostRunner", outcome: Outcome | None) -> tuple[dict[str, Any], ...] | None:
    """A freeze's record: the last kernel lines that reached us during the attempt (in
    arrival order); None without netconsole or for an attempt that ended by itself."""
    receiver = _receiver(runner)
    if receiver is None or outcome not in FREEZE_OUTCOMES:
        return None
    since = receiver.attempt_started.get(runner.host.name, 0.0)
    return tuple(line.for_record() for line in receiver.lines(runner.host.name, since=since))


def with_late_lines(runner: "HostRunner", record: Record) -> Record:
    """A freeze's record after recovery: also the lines that arrived after its declaration (a
    kernel that saw the lock prints its report and panic some seconds later). The new boot
    sends nothing before its netconsole is configured again, so every line is the old boot's."""
    lines = record_lines(runner, record.outcome if record.kernel_net is not None else None)
    return record if lines is None or lines == record.kernel_net else replace(record, kernel_net=lines)


def restore_at_end(runner: "HostRunner") -> None:
    """The host's own netconsole configuration back (stopped campaigns too); a failure is an event."""
    receiver = _receiver(runner)
    if receiver is None or runner.state.quarantined or runner.host.name not in receiver.configured:
        return
    try:
        report = runner.agent().netconsole(["restore"])
    except ReprofleetError as exc:
        runner.ctx.event(runner.host.name, CampaignEvent.NETCONSOLE_RESTORE_FAILED, error=str(exc))
        return
    what = CampaignEvent.NETCONSOLE_RESTORED if report.ok else CampaignEvent.NETCONSOLE_RESTORE_FAILED
    runner.ctx.event(runner.host.name, what, config=None if report.config is None else dict(report.config),
                     printk=report.printk, errors=list(report.errors))
