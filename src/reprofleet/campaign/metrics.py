"""metrics.prom: a running campaign as Prometheus metrics, in its own folder.

Every campaign keeps ``reports/<id>/metrics.prom`` in node_exporter's textfile format
(point the collector's ``--collector.textfile.directory`` at the folder, or link the file
into it): attempts by host and outcome, wedges, power cycles, quarantined hosts, the ETA,
whether the campaign runs and when it last said so. It is a campaign observer
(``campaign/observe.py``): a line written marks the file stale, and a thread of its own
rewrites it from the folder (``records/folder_state.py``, the same reading ``invoke status``
does) at most every ``interval_s``, so a host runner never waits for it. The last write,
when the campaign ends, says running 0.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Mapping

from reprofleet.campaign.observe import Ended, EventWriter, Watched
from reprofleet.model import CampaignEvent
from reprofleet.records.folder_state import METRICS_FILE, FolderState, read_state
from reprofleet.records.prometheus import RUNNING, UPDATED, Family, render, sample
from reprofleet.records.store import write_atomic


def families(state: FolderState, running: bool, now: float) -> list[Family]:
    """The metric families of one campaign's state."""
    campaign = state.campaign
    hosts = state.hosts
    eta = state.eta_s()
    out = [
        Family("reprofleet_attempts_total", "Attempts recorded, by host and outcome (amendments folded).", "counter",
               tuple(sample(n, campaign=campaign, host=h.name, outcome=o)
                     for h in hosts for o, n in sorted(h.outcomes.items()))),
        Family("reprofleet_attempts_done", "Attempts that count (a slot that runs again does not).", "gauge",
               tuple(sample(h.done, campaign=campaign, host=h.name) for h in hosts)),
        Family("reprofleet_attempts_planned", "Slots of each host's plan (a stop-rule cell at its cap).", "gauge",
               tuple(sample(h.planned, campaign=campaign, host=h.name) for h in hosts if h.planned is not None)),
        Family("reprofleet_wedges_total", "Attempts recorded as wedge, by host.", "counter",
               tuple(sample(h.wedges, campaign=campaign, host=h.name) for h in hosts)),
        Family("reprofleet_power_cycles_total", "Power cycles (successful switches off), by host.", "counter",
               tuple(sample(h.power_cycles, campaign=campaign, host=h.name) for h in hosts)),
        Family("reprofleet_host_quarantined", "1 while a host is quarantined (it runs no more of its plan).", "gauge",
               tuple(sample(1 if h.quarantined else 0, campaign=campaign, host=h.name) for h in hosts)),
        Family("reprofleet_hosts_quarantined", "Hosts quarantined in this campaign.", "gauge",
               (sample(sum(1 for h in hosts if h.quarantined), campaign=campaign),)),
        Family("reprofleet_host_needs_person", "1 while a frozen host without a power port waits for a person.",
               "gauge", tuple(sample(1 if h.needs_person else 0, campaign=campaign, host=h.name) for h in hosts)),
        Family(RUNNING, "1 while a controller runs this campaign.", "gauge",
               (sample(1 if running else 0, campaign=campaign),)),
        Family(UPDATED, "When the controller last wrote this file (unix time).", "gauge",
               (sample(round(now, 3), campaign=campaign),)),
    ]
    if eta is not None and running:
        out.append(Family("reprofleet_campaign_eta_seconds", "Seconds until every host is through its plan, at "
                          "each host's pace so far.", "gauge", (sample(round(eta, 1), campaign=campaign),)))
    return out


class CampaignMetrics:
    """Keeps metrics.prom current while the campaign runs (an observe.Observer)."""

    def __init__(self, interval_s: float = 5.0, now: Callable[[], float] = time.time) -> None:
        self.interval_s = interval_s
        self.now = now
        self._watched: Watched | None = None
        self._log: EventWriter | None = None
        self._stale = threading.Event()
        self._done = threading.Event()
        self._worker = threading.Thread(target=self._keep, name="metrics", daemon=True)
        self._failed = False

    def started(self, watched: Watched, log: EventWriter) -> None:
        self._watched, self._log = watched, log
        self.write(running=True)
        self._worker.start()

    def on_event(self, entry: Mapping[str, Any]) -> None:
        self._stale.set()

    def on_attempt_line(self, entry: Mapping[str, Any]) -> None:
        self._stale.set()

    def finished(self, ended: Ended) -> None:
        self._done.set()
        self._stale.set()
        if self._worker.is_alive():
            self._worker.join(30.0)
        self.write(running=False)

    def write(self, running: bool) -> None:
        """Rewrite the file now; a failure is one warning event (said once), never the campaign's end."""
        if self._watched is None:
            return
        root = self._watched.directory.root
        try:
            write_atomic(root / METRICS_FILE, render(families(read_state(root), running, self.now())))
        except Exception as exc:  # noqa: BLE001 - metrics are for watching; the records are what counts
            if not self._failed and self._log is not None:
                self._log("", CampaignEvent.WARNING, message=f"{METRICS_FILE} not written: {type(exc).__name__}: {exc}")
            self._failed = True

    def _keep(self) -> None:
        while not self._done.is_set():
            self._stale.wait()
            if self._done.is_set():
                return
            self._stale.clear()
            self.write(running=True)
            self._done.wait(self.interval_s)
