"""`invoke cache.push` and `invoke cache.pull`: snapshots outside a campaign.

``pull`` harvests one host's cache folder (the persistent cache a runtime built there, or
any folder) as a new snapshot folder on the controller that a playbook then names as
``cache_source``; ``push`` puts a snapshot on every host in parallel ahead of a campaign
(the campaign's own push then costs one question per host).
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprofleet.runner import cache_sync, poc
from reprofleet.remote.agent import REMOTE_ROOT
from reprofleet.remote.session import with_agent
from reprofleet.errors import HostLeased, ReprofleetError
from reprofleet.inventory import load_inventory
from reprofleet.model import Host
from reprofleet.remote.ssh import SshTarget

SNAPSHOT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def push_everywhere(inventory_path: str, settings: Any, folder: str,
                    ignore_lease: bool = False) -> dict[str, cache_sync.PushResult | ReprofleetError]:
    """One thread per host (up to 32): the snapshot of ``folder`` complete on each. A host a
    live campaign holds is left alone (its disk and SSH are the campaign's) unless told."""
    snap = cache_sync.build_snapshot(folder)
    hosts = load_inventory(inventory_path).hosts

    def push(host: Host, agent: Any) -> cache_sync.PushResult:
        if not ignore_lease:
            refuse_if_leased(agent)
        agent.ignore_lease = ignore_lease  # the agent fences the store's writes too
        return cache_sync.push(agent, snap, ssh_target(host, settings))

    with ThreadPoolExecutor(max_workers=max(1, min(32, len(hosts)))) as pool:
        results = pool.map(lambda h: with_agent(h, settings.transport, lambda a: push(h, a)), hosts)
        return dict(zip((h.name for h in hosts), results))


def refuse_if_leased(agent: Any) -> None:
    """Raise HostLeased when a live campaign lease is on the agent's host."""
    lease = agent.lease("show").live
    if lease:
        raise HostLeased(agent.host, f"campaign {lease.get('campaign')} of {lease.get('controller')} holds this host; "
                                     "pass --ignore-lease to act anyway")


def ssh_target(host: Host, settings: Any) -> SshTarget:
    known_hosts = Path(host.vars.get("reprofleet_known_hosts") or settings.transport.known_hosts).expanduser()
    return SshTarget(host, known_hosts, settings.transport.connect_timeout)


def remote_cache_folder(runtime: str | None, path: str | None) -> str:
    """The folder to harvest: ``path`` as given (relative to the login's home), or the
    persistent cache a campaign keeps for ``runtime`` (a docker image or a python path,
    as records show it in ``runtime.label``)."""
    if bool(runtime) == bool(path):
        raise ReprofleetError("name exactly one of --runtime (a docker image or python path) or --path")
    if path:
        return path
    return f"{REMOTE_ROOT}/cache/{poc.cache_key_for_label(str(runtime))}"


@dataclass(frozen=True)
class Pulled:
    host: str
    remote: str
    snapshot: cache_sync.Snapshot
    manifest: Path

    def to_json(self) -> dict[str, Any]:
        """``invoke cache.pull --json`` (docs/schema/cache.pull.schema.json)."""
        snap = self.snapshot
        return {"host": self.host, "remote": self.remote, "folder": str(snap.root), "files": len(snap.files),
                "bytes": snap.total_bytes, "snapshot": snap.snapshot, "manifest": str(self.manifest)}


def pull_from(inventory_path: str, settings: Any, host_name: str, name: str, remote: str, into: Path) -> Pulled:
    if not SNAPSHOT_NAME.match(name):
        raise ReprofleetError(f"a snapshot name is letters, digits, '.', '_' and '-', got {name!r}")
    hosts = {h.name: h for h in load_inventory(inventory_path).hosts}
    if host_name not in hosts:
        raise ReprofleetError(f"no host {host_name!r} in {inventory_path}")
    into.mkdir(parents=True, exist_ok=True)
    result = with_agent(hosts[host_name], settings.transport, lambda agent: cache_sync.pull(agent, remote, into / name))
    if isinstance(result, ReprofleetError):
        raise result
    return Pulled(host_name, remote, result, into / f"{name}.manifest.json")


def pushed_json(host: str, result: cache_sync.PushResult | Exception) -> dict[str, Any]:
    """One line of ``invoke cache.push --json`` (docs/schema/cache.push.schema.json)."""
    if isinstance(result, Exception):
        return {"host": host, "ok": False, "error": str(result)}
    return {"host": host, "ok": True, "snapshot": result.snapshot, "already_there": result.already_there,
            "sent_objects": result.sent_objects, "sent_bytes": result.sent_bytes, "seconds": result.seconds,
            "via": result.via}
