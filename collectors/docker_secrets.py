"""A docker attempt's secrets by file: ``--env-file`` on a 0600 file, removed once the
container exists, instead of the docker client's environment (``--env NAME``).

The controller names each secret to docker as ``--env NAME`` (the value never reaches an
argv); the supervisor, which holds the values in memory only, turns those flags into one
``--env-file`` on a file only its user can read, in the attempt's folder, and deletes it as
soon as ``docker container inspect`` finds the container (docker read the file before it
created it), and at the attempt's end whatever happened. What docker does with the values
afterwards is docker's: ``docker inspect`` lists a container's environment however it was
given (only a mounted file avoids that), which the README says.

A value with a newline cannot be written to an env file: that secret stays in the client's
environment as before. Host-side module: standard library only.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

ENV_FILE = "secrets.env"
GONE_AFTER_S = 120.0  # the file is removed by then even if the container never shows (the end removes it too)
POLL_S = 0.5  # real docker makes the container within a second or two; each poll is one docker call


def is_docker_run(cmd: List[str]) -> bool:
    return len(cmd) >= 2 and os.path.basename(cmd[0]) == "docker" and cmd[1] == "run"


def by_file(cmd: List[str], secrets: Dict[str, str], directory: str) -> Tuple[List[str], Dict[str, str], Optional[str]]:
    """(the command with the secrets' ``--env NAME`` replaced by one ``--env-file PATH``, the
    secrets still to put in the client's environment, the file's path or None)."""
    if not is_docker_run(cmd) or not secrets:
        return cmd, secrets, None
    filed = {name: value for name, value in secrets.items() if "\n" not in value and "\r" not in value}
    named = [i for i in range(2, len(cmd) - 1) if cmd[i] == "--env" and cmd[i + 1] in filed]
    if not named:
        return cmd, secrets, None
    path = os.path.join(directory, ENV_FILE)
    _write_private(path, "".join("%s=%s\n" % (name, filed[name]) for name in sorted(filed)))
    dropped = set(named) | {i + 1 for i in named}
    out = [arg for i, arg in enumerate(cmd) if i not in dropped]
    out[named[0]:named[0]] = ["--env-file", path]
    return out, {k: v for k, v in secrets.items() if k not in filed}, path


def _write_private(path: str, text: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def remove(path: Optional[str]) -> None:
    if path is None:
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def remove_once_created(path: Optional[str], exists: Callable[[], bool], gone_after_s: float = GONE_AFTER_S) -> None:
    """In a thread: the file goes as soon as ``exists()`` says docker made the container
    (bounded: at ``gone_after_s`` it goes anyway; a container not made by then never will)."""
    if path is None:
        return

    def watch() -> None:
        deadline = time.monotonic() + gone_after_s
        while time.monotonic() < deadline and os.path.exists(path) and not exists():
            time.sleep(POLL_S)
        remove(path)

    threading.Thread(target=watch, name="secrets-env-file", daemon=True).start()


def sweep(state_dir: str) -> int:
    """Remove the env file of every attempt whose supervisor is gone: a host that froze (or
    lost power) under a docker attempt kept its file on disk, and no supervisor of that boot
    will ever remove it. Called where no attempt can be starting (under the host lock, or
    after a boot); returns how many went."""
    import glob

    import attempt_state as state

    removed = 0
    for path in glob.glob(os.path.join(state_dir, "attempts", "*", ENV_FILE)):
        directory = os.path.dirname(path)
        attempt_id = os.path.basename(directory)
        meta = state.read_json(os.path.join(directory, state.META)) or {}
        if not state.supervisor_alive(directory, attempt_id, meta):
            remove(path)
            removed += 1
    return removed
