"""Kernel log lines during an attempt, tagged for what a GPU/host failure leaves there.

The tagger and the record parser are pure. The reader follows /dev/kmsg from its end
(a character device: one record per read(); a regular file on the simulated fleet:
followed by lines), and falls back to ``journalctl -kf`` when /dev/kmsg is unreadable.
"""

from __future__ import annotations

import errno
import os
import re
import select
import stat
import subprocess
import threading
from typing import Any, Callable, List, Optional, Tuple

KMSG = "/dev/kmsg"
POLL_S = 0.2
MAX_RECORD = 8192

TAG_PATTERNS: Tuple[Tuple[str, "re.Pattern[str]"], ...] = (
    ("xid", re.compile(r"NVRM: Xid \(")),
    ("nvrm", re.compile(r"\bNVRM:(?! loading NVIDIA)")),  # the driver's load banner is no finding
    ("aer", re.compile(r"\bAER:|PCIe Bus Error|aer_status|pcieport .*\berror\b", re.I)),
    ("mce", re.compile(r"\bmce:|Machine Check|\bMCE\b|\[Hardware Error\]", re.I)),
    ("hung_task", re.compile(r"blocked for more than \d+ seconds|hung_task", re.I)),
    ("watchdog", re.compile(r"watchdog: |soft lockup|hard LOCKUP|NMI watchdog|detected stalls? on CPU|"
                            r"rcu_(?:sched|preempt) self-detected stall|watchdog did not stop", re.I)),
    ("oops", re.compile(r"\bOops\b|BUG: unable to handle|general protection fault|kernel BUG at|"
                        r"Kernel panic|Call Trace:|RIP: ")),
    ("panic", re.compile(r"Kernel panic - not syncing|Rebooting in \d+ seconds")),
)
XID_NUMBER = re.compile(r"NVRM: Xid \([^)]*\): (\d+)")


def tags_of(message: str) -> List[str]:
    """Tags for one kernel message (empty for an ordinary line)."""
    return [tag for tag, pattern in TAG_PATTERNS if pattern.search(message)]


def xid_of(message: str) -> Optional[int]:
    match = XID_NUMBER.search(message)
    return int(match.group(1)) if match else None


def parse_kmsg_record(record: str) -> Optional[Tuple[int, int, str]]:
    """``pri,seq,usec,flags[,...];message`` -> (priority, seq, message); None if malformed.

    Continuation lines (" KEY=value" dictionary entries) after the first are dropped.
    """
    header, sep, rest = record.partition(";")
    if not sep:
        return None
    fields = header.split(",")
    if len(fields) < 3 or not fields[0].isdigit() or not fields[1].isdigit():
        return None
    message = rest.split("\n", 1)[0]
    return int(fields[0]), int(fields[1]), message


class KernelLogReader:
    """Follows the kernel log in a thread, calling `on_message(text)` for each new message."""

    def __init__(self, on_message: Callable[[str], None], notice: Callable[[str, str], None],
                 path: str = KMSG) -> None:
        self.on_message = on_message
        self.notice = notice
        self.path = path
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._journal: Optional["subprocess.Popen[bytes]"] = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kmsg", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        if self._journal is not None and self._journal.poll() is None:
            self._journal.terminate()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._journal is not None and self._journal.poll() is None:
            self._journal.kill()

    def _run(self) -> None:
        try:
            mode = os.stat(self.path).st_mode
            if stat.S_ISCHR(mode):
                self._follow_device()
            else:
                self._follow_file()
        except OSError as exc:
            self.notice("kmsg", "%s unreadable (%s): following journalctl -kf instead" % (self.path, exc))
            self._follow_journal()
        except Exception as exc:  # a reader bug never stops the attempt
            self.notice("kmsg", "kernel log reader stopped: %r" % exc)

    def _follow_device(self) -> None:
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            os.lseek(fd, 0, os.SEEK_END)  # only what happens from now on
            while not self._stop.is_set():
                ready, _, _ = select.select([fd], [], [], POLL_S)
                if ready:
                    self._read_records(fd)
        finally:
            os.close(fd)

    def _read_records(self, fd: int) -> None:
        for _ in range(10000):  # drain what is there, bounded
            try:
                record = os.read(fd, MAX_RECORD)
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten before we read them
                    continue
                if exc.errno == errno.EAGAIN:
                    return
                raise
            if not record:
                return
            parsed = parse_kmsg_record(record.decode("utf-8", "replace"))
            if parsed:
                self.on_message(parsed[2])

    def _follow_file(self) -> None:
        """The simulated fleet's /dev/kmsg: a regular file of records, one per line."""
        with open(self.path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            pending = b""
            while not self._stop.is_set():
                data = handle.read(1 << 16)
                if not data:
                    self._stop.wait(POLL_S)
                    continue
                lines = (pending + data).split(b"\n")
                pending = lines.pop()
                for line in lines:
                    parsed = parse_kmsg_record(line.decode("utf-8", "replace"))
                    if parsed:
                        self.on_message(parsed[2])

    def _follow_journal(self) -> None:
        try:
            self._journal = subprocess.Popen(
                ["journalctl", "-kf", "-n", "0", "-o", "short-unix", "--no-pager"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError as exc:
            self.notice("kmsg", "no kernel log at all: journalctl: %s" % exc)
            return
        assert self._journal.stdout is not None
        fd = self._journal.stdout.fileno()
        pending = b""
        while not self._stop.is_set() and self._journal.poll() is None:
            ready, _, _ = select.select([fd], [], [], POLL_S)
            if not ready:
                continue
            data = os.read(fd, 1 << 16)
            lines = (pending + data).split(b"\n")
            pending = lines.pop()
            for line in lines:
                self.on_message(journal_message(line.decode("utf-8", "replace")))


def journal_message(line: str) -> str:
    """``1700000000.123456 host kernel: message`` -> ``message``."""
    _, sep, message = line.partition(" kernel: ")
    return message if sep else line
