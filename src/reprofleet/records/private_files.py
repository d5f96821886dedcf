"""Campaign folders are private: 0700 folders, 0600 files, never written through a link.

A campaign folder holds what hosts sent (streams, kernel lines, facts, bug reports), the
attempt keys and the records; on a shared controller (a lab's jump host, a Pi several
people log in to) a 0755 folder lets every user read all of it, and one writable by
another user lets them plant a link (``netconsole/gpu-a.jsonl -> ~/.bashrc``) that the
controller would then append host bytes through. So:

- every folder the controller makes is 0700 and every file 0600, or 0750/0640 when the
  operator chose a group (``reprofleet.campaign_group: true`` in invoke.yaml, for a team
  that shares results through a Unix group; :func:`configure_group_access`);
- every file is opened with ``O_NOFOLLOW`` (a link in its place is refused, never
  followed), and the folder it is in must be a real folder, not a link to one;
- a file that already has other hard links is refused too: ``O_NOFOLLOW`` stops a
  symbolic link, not a second name planted for a victim file.

The report root a user names (``reports/``, perhaps a link to a bigger disk) is the user's
choice and is followed; the folders under it are the controller's and are checked.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from reprofleet.errors import ReprofleetError


class UnsafeFile(ReprofleetError):
    """A campaign file or folder is a link or otherwise not ours to write: nothing was written."""


@dataclass(frozen=True)
class Modes:
    """Permission bits of what the controller creates."""

    folder: int
    file: int


PRIVATE = Modes(folder=0o700, file=0o600)
GROUP = Modes(folder=0o750, file=0o640)  # the operator's group may read, never write

_LOCK = threading.Lock()
_modes = PRIVATE


def configure_group_access(group: bool) -> None:
    """Whether the controller's group may read campaign folders (invoke.yaml ``campaign_group``)."""
    global _modes
    with _LOCK:
        _modes = GROUP if group else PRIVATE


def modes() -> Modes:
    with _LOCK:
        return _modes


def make_folder(path: Path) -> Path:
    """``mkdir -p`` whose new folders are private; the last folder must be a real one (no link).

    Folders that exist keep their mode (the user's report root may be shared on purpose);
    each one made here gets :func:`modes`'s bits exactly, whatever the umask."""
    path = Path(path)
    missing = []
    probe = path
    while not os.path.lexists(probe) and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, modes().folder)
        except FileExistsError:
            continue  # made beside us by another thread: checked below like any other
        os.chmod(folder, modes().folder, follow_symlinks=False)
    check_folder(path)
    return path


def check_folder(folder: Path) -> None:
    """UnsafeFile unless ``folder`` is a real folder (a link to one is refused, not followed)."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        raise UnsafeFile(f"{folder}: no such folder") from None
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeFile(f"{folder}: is a link; a campaign folder is never written through one (remove it)")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeFile(f"{folder}: is not a folder")


def open_file(path: Path, flags: int) -> int:
    """``os.open`` of a campaign file: its folder checked, a link in its place refused
    (``O_NOFOLLOW``), a new file created with :func:`modes`'s bits, a file with a second
    hard link refused. The caller owns (and closes) the descriptor."""
    path = Path(path)
    check_folder(path.parent)
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, modes().file)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFile(f"{path}: is a link; a campaign file is never written through one (remove it)") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(f"{path}: is not a regular file")
        if info.st_nlink > 1:
            raise UnsafeFile(f"{path}: has {info.st_nlink} names (a hard link); refused (remove it)")
    except BaseException:
        os.close(fd)
        raise
    return fd


def append_fd(path: Path) -> int:
    """A descriptor that appends to ``path`` (created private when missing)."""
    return open_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)


def create_new_fd(path: Path) -> int:
    """A descriptor of a file made now (``O_EXCL``): a temporary file nobody planted."""
    return open_file(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)


def fsync_folder(folder: Path) -> None:
    """The rename of a file in ``folder`` survives a power cut of the controller (some file
    systems refuse fsync on a folder; the rename is still atomic there)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
