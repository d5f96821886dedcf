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
from typing import Any, Callable, Mapping, Sequence

from reprofleet.remote.agent import AgentClient
from reprofleet.errors import AgentFenced, ReprofleetError
from reprofleet.model import Host, NetconsoleSetting, Outcome, Record
from reprofleet.remote.netconsole import NetconsoleError, NetconsoleReceiver, SourceConflict, hosts_facing_address
from reprofleet.model.events import CampaignEvent
from reprofleet.records.disk_caps import CampaignDiskBudget, DiskCaps
from reprofleet.runner.host_log import HostLog

FREEZE_OUTCOMES = (Outcome.WEDGE, Outcome.REBOOT)


def start_receiver(hosts: Sequence[Host], folder: Path, files: DiskCaps = DiskCaps(),
                   disk: CampaignDiskBudget | None = None) -> NetconsoleReceiver | None:
    """One receiver for the campaign when any host has ``netconsole:``; None otherwise. It
    listens on each host's ``netconsole.listen``, or else on the controller's address on its
    route to the host (never on every interface); an address two hosts resolve to is theirs
    to share, so its lines are filed to neither (each host's events say so). ``files`` caps
    each host's file, ``disk`` is the campaign's cap the attempts' streams share."""
    chosen = [(host, setting) for host in hosts if (setting := host.netconsole) is not None]
    if not chosen:
        return None
    claims: dict[str, list[str]] = {}
    binds: set[str] = set()
    for host, setting in chosen:
        try:
            address = socket.gethostbyname(host.address)
        except OSError as exc:
            if setting.listen is None:
                raise NetconsoleError(f"{setting.where}: {host.name}: cannot resolve {host.address} ({exc}) to find "
                                      "the controller's address toward it: set netconsole.listen") from None
            address = host.address  # its kernel's source address is added at apply
        try:
            binds.add(setting.listen or hosts_facing_address(address))
        except NetconsoleError as exc:
            raise NetconsoleError(f"{setting.where}: {host.name}: {exc}") from None
        claims.setdefault(address, []).append(host.name)
    ports = {setting.port for _, setting in chosen}
    receiver = NetconsoleReceiver(ports, {address: names[0] for address, names in claims.items()}, folder,
                                  bind=sorted(binds), files=files, disk=disk)
    for address, names in claims.items():
        if len(set(names)) > 1:
            receiver.contest(address, names)  # before it starts: nothing from there is ever filed
    return receiver.start()


def wanted(setting: NetconsoleSetting) -> dict[str, Any]:
    return {"port": setting.port, "dev": setting.dev, "target": setting.target, "extended": setting.extended}


def _notes(refused: list[str]) -> dict[str, Any]:
    return {"notes": refused} if refused else {}


class HostNetconsole:
    """One host's netconsole through a campaign, with the campaign's receiver.

    Owned by the host runner; it knows only the host's name and ``netconsole:`` setting, the
    receiver (None when this host does not send to one), and where its events go. What it
    configured per boot and since when an attempt counts lines is the receiver's (shared by
    the campaign's hosts, keyed by host name).
    """

    def __init__(self, log: HostLog, setting: NetconsoleSetting | None,
                 receiver: NetconsoleReceiver | None) -> None:
        self.log = log
        self.setting = setting
        self.receiver = receiver if setting is not None else None  # the campaign's, when this host sends to it

    def ensure(self, agent: AgentClient, boot_id: str | None) -> None:
        """The host's kernel sends to us in this boot (applied once per boot); the attempt about
        to start counts its kernel lines from here."""
        receiver, setting, name = self.receiver, self.setting, self.log.host
        if receiver is None or setting is None:
            return
        receiver.attempt_started[name] = time.time()  # this attempt's lines count from here
        if name in receiver.configured and receiver.configured[name] == boot_id:
            return
        receiver.configured[name] = boot_id
        receiver.restart(name)  # a new boot's kernel numbers its messages from its own start
        refused = receiver.refusals.pop(name, [])
        try:
            report = agent.netconsole(["apply", "--json", json.dumps(wanted(setting))])
        except AgentFenced:
            raise  # the attempt ends as fenced, not as a host without netconsole
        except ReprofleetError as exc:
            self.log.event(CampaignEvent.NETCONSOLE_FAILED, error=str(exc), **_notes(refused))
            return
        config: Mapping[str, Any] = report.config or {}
        notes = list(report.notes) + refused
        if config.get("local_ip"):
            try:
                receiver.add_source(str(config["local_ip"]), name)
            except SourceConflict as exc:  # another host's address: its lines stay that host's
                self.log.event(CampaignEvent.NETCONSOLE_FAILED, error=str(exc), config=dict(config), notes=notes)
                return
        if report.ok:
            self.log.event(CampaignEvent.NETCONSOLE_APPLIED, config=dict(config), printk=report.printk,
                           notes=notes)
        else:
            self.log.event(CampaignEvent.NETCONSOLE_FAILED, error="; ".join(map(str, report.errors)),
                           notes=notes)

    def follow(self, attempt_id: str, write: Any) -> None:
        """From now on the host's kernel lines also go into this attempt's stream."""
        if self.receiver is not None:
            since = self.receiver.attempt_started.setdefault(self.log.host, time.time())
            self.receiver.follow(self.log.host, attempt_id, write, since)

    def unfollow(self) -> None:
        if self.receiver is not None:
            self.receiver.unfollow(self.log.host)

    def record_lines(self, outcome: Outcome | None) -> tuple[dict[str, Any], ...] | None:
        """A freeze's record: the last kernel lines that reached us during the attempt (in
        arrival order); None without netconsole or for an attempt that ended by itself."""
        if self.receiver is None or outcome not in FREEZE_OUTCOMES:
            return None
        since = self.receiver.attempt_started.get(self.log.host, 0.0)
        return tuple(line.for_record() for line in self.receiver.lines(self.log.host, since=since))

    def with_late_lines(self, record: Record) -> Record:
        """A freeze's record after recovery: also the lines that arrived after its declaration (a
        kernel that saw the lock prints its report and panic some seconds later). The new boot
        sends nothing before its netconsole is configured again, so every line is the old boot's."""
        lines = self.record_lines(record.outcome if record.kernel_net is not None else None)
        return record if lines is None or lines == record.kernel_net else replace(record, kernel_net=lines)

    def restore_at_end(self, agent: Callable[[], AgentClient], skip: bool) -> None:
        """The host's own netconsole configuration back (stopped campaigns too); a failure is an event."""
        if self.receiver is None or skip or self.log.host not in self.receiver.configured:
            return
        try:
            report = agent().netconsole(["restore"])
        except AgentFenced:
            raise
        except ReprofleetError as exc:
            self.log.event(CampaignEvent.NETCONSOLE_RESTORE_FAILED, error=str(exc))
            return
        what = CampaignEvent.NETCONSOLE_RESTORED if report.ok else CampaignEvent.NETCONSOLE_RESTORE_FAILED
        self.log.event(what, config=None if report.config is None else dict(report.config),
                       printk=report.printk, errors=list(report.errors))
