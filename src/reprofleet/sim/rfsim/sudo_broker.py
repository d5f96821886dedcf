"""The root side of a simulated host's ``sudo`` (see ``sudo``): judge, then run as root.

``python3 -m rfsim.sudo_broker [--secure-path PATH] [--env-keep NAME,...] [--ready FILE]``, started by the host's boot script
when its login is not root. It listens on ``/etc/reprofleet-sim/sudo.sock`` (mode 0666: who
is asking is read from the connection, SO_PEERCRED, never from what the caller says),
resolves the command in ``secure_path`` itself, judges it by the host's ``sudo`` rule
(``host.json``: ``all``, ``nvidia-smi`` or ``none``; root always may), and runs it as root
on the caller's own stdin, stdout and stderr, relaying the signals the caller forwards. The
exit status goes back on the connection. A caller killed outright (SIGKILL) leaves its
command running, as with sudo(8), which cannot relay a signal it never gets.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import struct
import subprocess
import sys
import threading
from typing import Any, Dict, List, Optional, Tuple

from . import hwio
from .sudo import socket_path

SECURE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # Debian's sudoers secure_path
RULES = ("all", "nvidia-smi", "none")
PASSWORD_REQUIRED = "sudo: a password is required"
NO_TERMINAL = ("sudo: a terminal is required to read the password; either use the -S option to read from standard "
               "input or configure an askpass helper")


def resolve(command: str, secure_path: str) -> Optional[str]:
    """The fully-qualified command, as sudoers finds it: a path as given, a name in secure_path."""
    if "/" in command:
        return command if os.path.isfile(command) and os.access(command, os.X_OK) else None
    return shutil.which(command, path=secure_path)


def permitted(uid: int, rule: str, path: str, secure_path: str) -> bool:
    """May ``uid`` run ``path`` without a password? Root may; the login by the host's rule."""
    if uid == 0 or rule == "all":
        return True
    if rule == "nvidia-smi":
        smi = shutil.which("nvidia-smi", path=secure_path)
        return smi is not None and os.path.realpath(smi) == os.path.realpath(path)
    return False


def decide(uid: int, request: Dict[str, Any], rule: str, secure_path: str) -> Tuple[Optional[List[str]], Dict[str, Any]]:
    """(argv to run as root, or None) and the reply when nothing runs."""
    command = [str(part) for part in request.get("command") or []]
    listing = bool(request.get("list"))
    if listing and not command:
        if uid == 0 or rule != "none":
            allowed = "ALL" if uid == 0 or rule == "all" else shutil.which("nvidia-smi", path=secure_path)
            return None, {"exit": 0, "print": f"User {_name(uid)} may run the following commands on this host:\n"
                                              f"    (root) NOPASSWD: {allowed}"}
        return None, _refused(request)
    path = resolve(command[0], secure_path)
    if path is None:
        return None, {"exit": 1, "error": f"sudo: {command[0]}: command not found"}
    if not permitted(uid, rule, path, secure_path):
        return None, {"exit": 1} if listing else _refused(request)
    if listing:
        return None, {"exit": 0, "print": " ".join([path, *command[1:]])}
    return [path, *command[1:]], {}


def _refused(request: Dict[str, Any]) -> Dict[str, Any]:
    if request.get("non_interactive"):
        return {"exit": 1, "error": PASSWORD_REQUIRED}
    return {"exit": 1, "error": f"{NO_TERMINAL}\n{PASSWORD_REQUIRED}"}


def _name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def environment(uid: int, request: Dict[str, Any], secure_path: str, keep: Dict[str, str]) -> Dict[str, str]:
    """sudo's env_reset: a fresh environment for root, with what sudo sets and keeps (``keep``:
    the broker's ``--env-keep`` names, with its own values: a tree without namespaces finds its
    fake tools through them)."""
    env = {**keep, "PATH": secure_path, "HOME": "/root", "USER": "root", "LOGNAME": "root", "SHELL": "/bin/bash",
           "SUDO_USER": _name(uid), "SUDO_UID": str(uid), "SUDO_GID": str(uid)}
    for name, key in (("TERM", "term"), ("LANG", "lang")):
        if request.get(key):
            env[name] = str(request[key])
    return env


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def serve_one(conn: socket.socket, secure_path: str, keep: Dict[str, str]) -> None:
    fds: List[int] = []
    try:
        uid = _peer_uid(conn)
        data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
        request = json.loads(data.decode().splitlines()[0])
        rule = str(hwio.host_config().get("sudo", "all"))
        argv, reply = decide(uid, request, rule if rule in RULES else "none", secure_path)
        if argv is not None:
            reply = {"exit": _run(conn, argv, fds, request, environment(uid, request, secure_path, keep))}
        conn.sendall((json.dumps(reply) + "\n").encode())
    except (OSError, ValueError, IndexError) as exc:
        try:
            conn.sendall((json.dumps({"exit": 1, "error": f"sudo: {exc}"}) + "\n").encode())
        except OSError:
            pass
    finally:
        for fd in fds:
            os.close(fd)
        conn.close()


def _run(conn: socket.socket, argv: List[str], fds: List[int], request: Dict[str, Any], env: Dict[str, str]) -> int:
    cwd = str(request.get("cwd") or "/")
    stdin, stdout, stderr = (fds + [-1, -1, -1])[:3]
    proc = subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=stderr, env=env,  # nosec B603  # the simulator's sudo: running the judged command is its job
                            cwd=cwd if os.path.isdir(cwd) else "/")
    threading.Thread(target=_relay, args=(conn, proc), daemon=True).start()
    return proc.wait()


def _relay(conn: socket.socket, proc: "subprocess.Popen[bytes]") -> None:
    """Each ``{"signal": N}`` the caller forwards goes to the command."""
    try:
        for line in conn.makefile("rb"):
            number = json.loads(line).get("signal")
            if isinstance(number, int) and proc.poll() is None:
                proc.send_signal(number)
    except (OSError, ValueError):
        pass


def main(argv: List[str]) -> int:
    secure_path = argv[argv.index("--secure-path") + 1] if "--secure-path" in argv else SECURE_PATH
    path = socket_path()
    try:
        os.unlink(path)  # a socket left by the boot before this one
    except FileNotFoundError:
        pass
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o666)  # nosec B103  # anyone may ask; who asks is read from the socket (SO_PEERCRED), and the broker judges
    server.listen(64)
    ready = argv[argv.index("--ready") + 1] if "--ready" in argv else None
    names = argv[argv.index("--env-keep") + 1].split(",") if "--env-keep" in argv else []
    keep = {name: os.environ[name] for name in names if name in os.environ}
    if ready:
        open(ready, "w").close()
    while True:
        conn, _ = server.accept()
        threading.Thread(target=serve_one, args=(conn, secure_path, keep), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
