"""Telling a person what a long campaign needs them to know, each thing once.

A night's campaign runs unattended; four things in it are worth a message: the campaign
finished (its verdict lines), a host was quarantined (why), a host needs a person (it froze
and has no power port: its address, its outlets), and a cell reproduced for the first time.
:class:`Notifier` is a campaign observer (``campaign/observe.py``): it decides from the lines
the campaign writes which :class:`Notice` to send, and hands each to an injected ``send``
(``campaign/notify_senders.py`` builds the real one: Apprise URLs and/or a command) on a
thread of its own, so a slow or dead receiver never holds a host back. A send that fails is
one ``notify_failed`` event in events.jsonl; the campaign goes on. A host's words in a notice
are quoted by ``campaign/notify_text.py``: never markup, a mention or an escape sequence.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from enum import Enum, unique
from pathlib import Path
from typing import Any, Callable, Mapping

from reprofleet.campaign import notify_text
from reprofleet.campaign.observe import Ended, EventWriter, Watched
from reprofleet.model import CampaignEvent, Host, Judging, Role, event_of
from reprofleet.records.folder_state import quarantine_reason
from reprofleet.records.pooling import load_pool
from reprofleet.records.reader import AttemptLines, RecordedAttempt, read_attempts
from reprofleet.verdicts import judge


@unique
class NoticeKind(str, Enum):
    """What a notice is about (the ``kind`` a command receiver reads)."""

    FINISHED = "campaign_finished"
    QUARANTINED = "host_quarantined"
    NEEDS_PERSON = "needs_person"
    FIRST_REPRODUCTION = "first_reproduction"


@dataclass(frozen=True)
class Notice:
    """One message: a title line and a body of plain lines."""

    kind: NoticeKind
    campaign: str
    title: str
    body: str
    host: str = ""
    cell: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "campaign": self.campaign, "title": self.title, "body": self.body,
                "host": self.host, "cell": self.cell}


Send = Callable[[Notice], None]  # raises on failure; its message must hold no secret


def outlets_of(host: Host) -> str:
    """The power ports a person would look for, in words (never a credential)."""
    ports = [f"{p.driver} {p.address}" + (f" outlet {p.outlet}" if p.outlet else "") for p in host.power_ports]
    return ", ".join(ports) if ports else "none in the inventory"


def verdict_lines(folder: Path) -> list[str]:
    """One line per cell, as ``invoke report`` judges the folder, judged as finished (this
    controller's run is over, though it still holds the folder's lock while it says so)."""
    if not (folder / "attempts.jsonl").exists():
        return ["no attempt was recorded"]
    judgement = judge(load_pool([folder], running=lambda _folder: False))
    reasons = (*judgement.excluded, *judgement.not_run)  # what a sentence may quote from the records
    return [notify_text.line_quoting(f"{v.cell}: {v.text}", reasons) for v in judgement.verdicts] \
        or ["no verdict: no attempt could be judged"]


class Notifier:
    """Decides what to tell, once each, and sends it in the background."""

    def __init__(self, send: Send, *, kinds: frozenset[NoticeKind] = frozenset(NoticeKind),
                 verdicts: Callable[[Path], list[str]] = verdict_lines, deadline_s: float = 60.0) -> None:
        self.send = send
        self.kinds = kinds  # what the user asked to hear about
        self.verdicts = verdicts
        self.deadline_s = deadline_s  # how long the campaign's end waits for the last notices
        self._queue: "queue.Queue[Notice | None]" = queue.Queue()
        self._lock = threading.Lock()
        self._said: set[tuple[str, str]] = set()  # (kind, key) already notified
        self._lines = AttemptLines()  # attempts.jsonl as it is appended (an amendment knows its cell)
        self._watched: Watched | None = None
        self._log: EventWriter | None = None
        self._judging = Judging()
        self._worker = threading.Thread(target=self._deliver, name="notify", daemon=True)

    # -- the campaign's side (observe.Observer) --------------------------------------------

    def started(self, watched: Watched, log: EventWriter) -> None:
        self._watched, self._log, self._judging = watched, log, watched.playbook.judging
        for record in read_attempts(watched.directory.attempts):  # a resume: told before
            if self._reproduces(record):
                self._said.add((NoticeKind.FIRST_REPRODUCTION.value, record.cell))
        self._worker.start()

    def on_event(self, entry: Mapping[str, Any]) -> None:
        event, host, why = event_of(entry), str(entry.get("host") or ""), quarantine_reason(entry)
        if why is not None and self._first(NoticeKind.QUARANTINED, host):
            self._post(NoticeKind.QUARANTINED, f"{host} quarantined", f"{host}: {notify_text.quoted(why)}", host=host)
        elif event is CampaignEvent.NEEDS_PERSON:  # every freeze of such a host needs a person again
            where = self._host(host)
            address = f"{where.address}:{where.port}" if where else "?"
            outlets = outlets_of(where) if where else "?"
            self._post(NoticeKind.NEEDS_PERSON, f"{host} needs a person",
                       f"{host} at {address} (outlets: {outlets}): {entry.get('message')}", host=host)

    def on_attempt_line(self, entry: Mapping[str, Any]) -> None:
        record = self._lines.told(entry)
        if record is None:
            return
        cell = record.cell
        if self._reproduces(record) and self._first(NoticeKind.FIRST_REPRODUCTION, cell):
            # an amendment on its own names no host, index or phase: each said as None
            self._post(NoticeKind.FIRST_REPRODUCTION, f"cell {cell} reproduced",
                       f"first reproduction of cell {cell}: {record.outcome} on {record.host or None} "
                       f"(attempt {record.attempt_index}, last phase {notify_text.quoted(record.last_phase)})",
                       host=record.host, cell=cell)

    def finished(self, ended: Ended) -> None:
        if self._watched is None:
            return
        how = ("stopped by a signal (--resume goes on)" if ended.interrupted else
               f"stopped: {notify_text.quoted(ended.failure)}" if ended.failure else "finished")
        try:
            lines = self.verdicts(self._watched.directory.root)
        except Exception as exc:  # noqa: BLE001 - the notice still says the campaign ended
            lines = [f"verdicts could not be computed: {notify_text.quoted(f'{type(exc).__name__}: {exc}')}"]
        lines += [f"{host}: quarantined: {notify_text.quoted(why)}" for host, why in sorted(ended.quarantined.items())]
        self._post(NoticeKind.FINISHED, how, "\n".join(lines))
        self._queue.put(None)
        self._worker.join(self.deadline_s)

    # -- deciding and sending ----------------------------------------------------------------

    def _reproduces(self, record: RecordedAttempt) -> bool:
        try:
            role = record.classified(self._judging).role
        except ValueError:
            return False  # an outcome this controller does not know
        return role is Role.REPRODUCTION

    def _first(self, kind: NoticeKind, key: str) -> bool:
        with self._lock:
            if (kind.value, key) in self._said:
                return False
            self._said.add((kind.value, key))
            return True

    def _host(self, name: str) -> Host | None:
        return next((h for h in self._watched.hosts if h.name == name), None) if self._watched else None

    def _post(self, kind: NoticeKind, what: str, body: str, host: str = "", cell: str = "") -> None:
        if kind not in self.kinds:
            return
        campaign = self._watched.campaign_id if self._watched else ""
        self._queue.put(Notice(kind, campaign, notify_text.title(f"reprofleet {campaign}: {what}"),
                               notify_text.body(body), host, cell))

    def _deliver(self) -> None:
        while True:
            notice = self._queue.get()
            if notice is None:
                return
            try:
                self.send(notice)
            except Exception as exc:  # noqa: BLE001 - a failed notification never stops the campaign
                if self._log is not None:
                    self._log(notice.host, CampaignEvent.NOTIFY_FAILED, kind=notice.kind.value,
                              message=f"{type(exc).__name__}: {exc}")
