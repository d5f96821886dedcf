"""Campaign records on disk: attempts.jsonl, per-attempt streams, pooling.

An attempt's record is appended and fsync'd before the campaign takes its next step, so a
controller that dies mid-campaign loses nothing already decided and can resume. Stream
lines are flushed as they arrive, so the last seconds before a host froze are on the
controller's disk even though the host never says goodbye.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
import time
from datetime import datetime, timezone
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import jsonlines

from reprofleet.errors import ReprofleetError
from reprofleet.model import SCHEMA_VERSION, Record, file_name
from reprofleet.records.private_files import append_fd, create_new_fd, fsync_folder, make_folder, open_file
from reprofleet.records.stream_file import StreamWriter as StreamWriter  # its own module; imported from here as before


class RecordError(ReprofleetError):
    """An attempts file cannot be read as records of a schema we know."""


@dataclass(frozen=True)
class CampaignDir:
    """The files of one campaign under the report directory."""

    root: Path

    @property
    def attempts(self) -> Path:
        return self.root / "attempts.jsonl"

    @property
    def streams(self) -> Path:
        return self.root / "streams"

    @property
    def power(self) -> Path:
        return self.root / "power.jsonl"

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def facts(self) -> Path:
        return self.root / "facts"

    @property
    def manifest(self) -> Path:
        return self.root / "campaign.json"

    def stream_path(self, attempt_id: str) -> Path:
        return self.streams / file_name(attempt_id, ".jsonl", what="attempt id")

    def create(self) -> "CampaignDir":
        """The folder and its sub-folders, private (records/private_files.py); a link planted
        in place of any of them is refused."""
        for folder in (self.root, self.streams, self.facts):
            make_folder(folder)
        return self


class FolderBusy(RecordError):
    """Another controller process runs this campaign from this folder."""


class CampaignLock:
    """An flock on a campaign folder for as long as one controller runs it.

    Two controller processes on one folder (a ``--resume`` typed while the first still runs,
    in another terminal) would both append to attempts.jsonl and both drive its hosts; the
    second is refused at once with the first's pid. The kernel drops the lock when the
    holder dies, however it dies, so a kill -9 never leaves the folder locked.
    """

    NAME = ".controller.lock"

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / self.NAME
        self._handle: Any = None

    def __enter__(self) -> "CampaignLock":
        # Opened without truncating and without following a link: only the holder of the
        # lock empties the file (the pid a refused second controller reads stays whole), and
        # a link planted in its place is refused, never truncated through.
        handle = os.fdopen(open_file(self.path, os.O_RDWR | os.O_CREAT), "r+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read(64).strip()
            handle.close()
            holder = holder if holder.isdigit() else "unknown"  # a pid, never other bytes someone wrote there
            raise FolderBusy(f"{self.path.parent}: another controller (pid {holder}) is running this campaign; "
                             "wait for it or stop it (Ctrl-C, or kill its pid) before resuming") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._handle is not None:
            self._handle.close()  # closing drops the flock
            self._handle = None

    @classmethod
    def held(cls, folder: Path) -> bool:
        """Whether a controller holds ``folder`` now (a report on a running campaign looks
        before its end). Asks for a shared lock without waiting and gives it back at once:
        a controller starting in that instant is refused as if a second one ran, and its
        user starts it again."""
        path = Path(folder) / cls.NAME
        if not path.exists():
            return False
        try:
            with os.fdopen(open_file(path, os.O_RDONLY), "r", encoding="utf-8") as handle:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    return True
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        except OSError:
            return False
        return False


def iso_utc(unix_time: float | None) -> str | None:
    """The timestamp format of every record: ISO 8601 UTC, milliseconds, ``Z``."""
    if unix_time is None:
        return None
    return datetime.fromtimestamp(unix_time, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def utc_now() -> str:
    return str(iso_utc(time.time()))


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so a reader sees the old file or the new one, never half.

    Written beside its place, fsync'd, renamed over it, then the folder is fsync'd so the
    rename itself survives a power cut of the controller.
    """
    path = Path(path)
    temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with os.fdopen(create_new_fd(temp), "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    fsync_folder(path.parent)


def append_line(path: Path, line: str) -> None:
    """Append one line durably and whole (see ``_fsync_append``)."""
    _fsync_append(Path(path), line)


def _fsync_append(path: Path, line: str) -> None:
    """One line, whole or not at all: written with O_APPEND and fsync'd; if the disk fills
    half-way, the file is cut back to where it was, so no reader ever sees a torn line."""
    data = (line + "\n").encode("utf-8")
    fd = append_fd(path)
    try:
        before = os.fstat(fd).st_size
        try:
            written = os.write(fd, data)
            while written < len(data):  # a short write (disk nearly full): finish it or raise
                written += os.write(fd, data[written:])
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, before)
            raise
    finally:
        os.close(fd)


TORN_KEPT = 4096  # bytes of a cut torn line kept for the report (the line itself may be huge)


def cut_torn_tail(path: Path) -> str:
    """Cut a file back to its last complete line; return the start of what was cut ("" when nothing).

    A controller killed mid-append leaves a line without its newline. Appending after it
    would glue the next record onto the torn one, and both would be lost to every reader.
    The file is searched backwards block by block, so a torn line of any length is found
    (forensics can make a single record many MiB long).
    """
    if not path.exists():
        return ""
    with os.fdopen(open_file(path, os.O_RDWR), "r+b") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return ""
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return ""
        keep = _after_last_newline(handle, size)
        handle.seek(keep)
        torn = handle.read(TORN_KEPT)
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
    cut = size - keep
    text = torn.decode("utf-8", errors="replace")
    return text if cut <= TORN_KEPT else f"{text}... ({cut} bytes cut)"


def _after_last_newline(handle: Any, size: int, block: int = 1 << 20) -> int:
    """The offset just after the last newline before ``size`` (0 when the file has none)."""
    end = size
    while end > 0:
        start = max(0, end - block)
        handle.seek(start)
        chunk = handle.read(end - start)
        at = chunk.rfind(b"\n")
        if at >= 0:
            return start + at + 1
        end = start
    return 0


class JsonlAppender:
    """Appends JSON lines to one file, thread-safe, each line whole and fsync'd before returning.

    On open, a torn last line (a killed controller) is cut off; ``torn`` keeps what was cut
    so the campaign can report it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.torn = cut_torn_tail(path)

    def append(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, sort_keys=True, default=str)
        with self._lock:
            _fsync_append(self.path, line)


TEXT_CAP = 4096  # characters of one string a host sent (a log line, a kernel line, a file it read)
ITEMS_CAP = 200  # items of one list a host sent (findings, kernel lines)
FIELD_CAP = 1 << 20  # bytes of one field's JSON after the caps above (forensics of a thousand long lines)


def bounded(entry: dict[str, Any]) -> dict[str, Any]:
    """``entry`` with every string and list a host could make huge cut to a bound, and a ``cut``
    key saying where and how much: a host's bytes are hostile input, and one record of many
    MiB would make attempts.jsonl slow to read and a torn line of it hard to cut."""
    cuts: list[str] = []
    out = {key: _bound(value, key, cuts) for key, value in entry.items()}
    for key, value in list(out.items()):
        size = len(json.dumps(value, default=str))
        if size > FIELD_CAP:
            out[key] = {"cut": True, "bytes": size, "head": json.dumps(value, default=str)[:4096]}
            cuts.append(f"{key}: {size} bytes, over {FIELD_CAP}")
    if cuts:
        out["cut"] = cuts
    return out


def _bound(value: Any, path: str, cuts: list[str]) -> Any:
    if isinstance(value, str) and len(value) > TEXT_CAP:
        cuts.append(f"{path}: {len(value) - TEXT_CAP} characters")
        return value[:TEXT_CAP] + f"... [{len(value) - TEXT_CAP} characters cut]"
    if isinstance(value, list):
        kept = [_bound(v, f"{path}[{i}]", cuts) for i, v in enumerate(value[:ITEMS_CAP])]
        if len(value) > ITEMS_CAP:
            cuts.append(f"{path}: {len(value) - ITEMS_CAP} items")
            kept.append(f"... [{len(value) - ITEMS_CAP} more items cut]")
        return kept
    if isinstance(value, dict):
        return {k: _bound(v, f"{path}.{k}", cuts) for k, v in value.items()}
    return value


class AttemptLog(JsonlAppender):
    """attempts.jsonl: one record per attempt, and amendments that complete a record later.
    Both are bounded (see :func:`bounded`)."""

    def append_record(self, record: Record) -> None:
        self.append(bounded(record.to_json()))

    def amend(self, attempt_id: str, **fields: Any) -> None:
        """What was learnt about a recorded attempt after it was written (readers fold it in)."""
        self.append(bounded({"schema": SCHEMA_VERSION, AMENDS: attempt_id, "amended": utc_now(), **fields}))


def write_facts(campaign: CampaignDir, host: str, facts: dict[str, Any]) -> str:
    """Store a host's facts snapshot and return its hash (records carry the hash)."""
    body = json.dumps(facts, sort_keys=True, default=str)
    digest = hashlib.sha256(body.encode()).hexdigest()
    write_atomic(campaign.facts / file_name(host, ".json", what="host name"), body + "\n")
    kept = campaign.facts / "by-hash" / f"{digest}.json"  # each snapshot a record names stays readable
    if not kept.exists():
        make_folder(kept.parent)
        write_atomic(kept, body + "\n")
    return digest


def read_facts_by_hash(campaign: CampaignDir, digest: str) -> dict[str, Any] | None:
    """The facts snapshot a record's ``facts`` hash names (the host's facts as they were when it ran)."""
    if not all(c in "0123456789abcdef" for c in digest) or len(digest) != 64:
        return None
    try:
        facts = json.loads((campaign.facts / "by-hash" / f"{digest}.json").read_text())
    except (OSError, ValueError):
        return None
    return facts if isinstance(facts, dict) else None


def read_facts(campaign: CampaignDir, host: str) -> dict[str, Any] | None:
    """The facts snapshot ``write_facts`` stored for a host (the one its records' hash names);
    None when there is none or it cannot be read."""
    try:
        facts = json.loads((campaign.facts / file_name(host, ".json", what="host name")).read_text())
    except (OSError, ValueError):
        return None
    return facts if isinstance(facts, dict) else None


AMENDS = "amends"  # the key of an amendment line: the attempt id it completes


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """Records of one attempts.jsonl, each with its amendments folded in, in file order.

    A wedge is recorded the moment it is declared; what recovery learns later (forensics,
    or that the host came back by itself) follows as amendment lines ``{"amends": id, ...}``,
    so a controller killed during recovery loses nothing already decided. A torn last line
    (a controller killed mid-write) is skipped.
    """
    records: dict[str, dict[str, Any]] = {}
    for number, entry in _entries(path):
        if AMENDS in entry:
            target = records.get(str(entry[AMENDS]))
            if target is None:
                raise RecordError(f"{path}:{number}: amends attempt {entry[AMENDS]}, which is not recorded before it")
            cut = list(target.get("cut") or []) + list(entry.get("cut") or [])
            target.update({k: v for k, v in entry.items() if k not in (AMENDS, "schema", "amended")})
            if cut:
                target["cut"] = cut  # what the record and each amendment cut, all of it
            target["amended"] = entry.get("amended") or True
            continue
        records[str(entry.get("attempt"))] = entry
    yield from records.values()


def _entries(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each JSON line with its line number, through ``jsonlines`` (one read per line of the
    file, so its line numbers are the file's)."""
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    reader = jsonlines.Reader(lines)
    for number, line in enumerate(lines, start=1):
        try:
            entry: Any = reader.read()
        except jsonlines.InvalidLineError as exc:
            if not line.strip() or number >= len(lines) - 1:
                continue  # a blank line, or the torn tail of an interrupted append
            raise RecordError(f"{path}:{number}: not JSON: {exc}") from exc
        schema = entry.get("schema") if isinstance(entry, dict) else None
        if not isinstance(schema, int) or schema > SCHEMA_VERSION:
            raise RecordError(f"{path}:{number}: schema {schema!r} is not one this version reads")
        yield number, entry


def read_log_lines(path: Path) -> list[dict[str, Any]]:
    """Every whole JSON object of an events or power log; a torn line (a killed controller) is skipped."""
    if not path.exists():
        return []
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def power_cycles_logged(power_log: Path, host: str) -> int:
    """Power cycles a campaign already made on ``host``: its successful "off" switches in power.jsonl."""
    return sum(1 for e in read_log_lines(power_log)
               if e.get("host") == host and e.get("action") == "off" and e.get("result") == "ok")


def read_stream(path: Path) -> list[dict[str, Any]]:
    """Every line of a stream file (for reports and tests)."""
    with jsonlines.open(path) as reader:
        return [line for line in reader.iter(type=dict, skip_invalid=True)]
