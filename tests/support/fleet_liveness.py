"""A campaign on the simulated fleet and what it wrote, for the fleet tests of liveness and
power safety: the events and power actions of a finished campaign, the events of a running
one, a tasmota plug that feeds every host, and polling until evidence is on record.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.playbook import load_playbook
from reprofleet.runner.recovery import recovery_factory
from reprofleet.sim.power import HttpPlugServer

from tests.support.fleet_campaign import settings_for


def run_fleet_campaign(fleet: Any, inventory: Path, book: Path, reports: Path,
                       settings: dict[str, Any] | None = None, **kwargs: Any):
    plan = make_plan(load_playbook(book), load_inventory(inventory).hosts)
    return run_campaign(plan, settings_for(fleet, **(settings or {})), reports, recovery_factory=recovery_factory,
                        **kwargs)


def liveness_events(result: Any, host: str) -> list[dict]:
    return [e for e in campaign_events(result)
            if e["host"] == host and e["event"] in ("suspect", "probe", "clear", "guard")]


def probe_answers(result: Any, host: str) -> list[str]:
    return [e["answer"] for e in liveness_events(result, host) if e["event"] == "probe"]


def until(evidence: Any, deadline_s: float, poll_s: float = 0.1) -> bool:
    """Poll ``evidence()`` until it holds (True) or the deadline passes (False): an outage or a
    starvation lasts until what it must cause is on record, not for a guessed time."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if evidence():
            return True
        time.sleep(poll_s)
    return False


def live_events(reports: Path) -> list[dict]:
    """events.jsonl of the campaign running under ``reports`` (whole lines only)."""
    entries = []
    for path in reports.glob("*/events.jsonl"):
        for line in path.read_text().splitlines():
            try:
                entries.append(json.loads(line))
            except ValueError:
                continue  # a line being written
    return entries


def campaign_events(result: Any) -> list[dict]:
    path = result.directory.events
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def switching_actions(result: Any) -> list[dict]:
    """Power actions that switch something (status reads, e.g. by the network witness, do not)."""
    path = result.directory.power
    entries = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [e for e in entries if e["action"] in ("on", "off", "cycle")]


def plugged(fleet: Any, sim_inventory: Any, workdir: Path, outlet_for: dict[str, str] | None = None) -> tuple[Any, Path]:
    plug = HttpPlugServer(workdir, "tasmota", {str(i + 1): h.paths.power for i, h in enumerate(fleet.hosts)}).start()
    blocks = {h.name: plug.pdu_block((outlet_for or {}).get(h.name, str(i + 1))) for i, h in enumerate(fleet.hosts)}
    return plug, sim_inventory(fleet, pdu=blocks)
