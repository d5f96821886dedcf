"""``sudo`` on a simulated host: what sudo(8) and sudoers(5) say about ``-n`` and ``-l``, for a
host whose login is not root (``SimHostSpec.login_user``).

A script cannot be setuid, so the command is not run by this process: it asks the host's
broker (``sudo_broker``, root, started at boot), which learns the caller's uid from the
socket itself (SO_PEERCRED), resolves and judges the command, and runs it as root on this
process's own stdin, stdout and stderr (passed over the socket); signals sent to this process
are relayed to the command, and its exit status is this process's, as sudo(8) does.

What is modelled, from the manuals (sudo(8), sudoers(5), e.g. man.he.net/man5/sudoers):

- ``-n``: "Avoid prompting the user for input of any kind. If a password is required for the
  command to run, sudo will display an error message and exit" -- ``sudo: a password is
  required``, exit 1. The simulated host has no passwords, so without ``-n`` a command the
  policy does not let run without one fails the same way, after saying no terminal was there.
- "A password is not required if the invoking user is root ... or if the policy has disabled
  authentication for the user or command" (NOPASSWD): root runs anything; the login runs what
  the host's ``sudo`` rule gives it (``all``, ``nvidia-smi`` -- the host's nvidia-smi with any
  arguments, as a sudoers command given by path alone -- or ``none``).
- ``-l COMMAND``: permitted, "the fully-qualified path to the command is displayed along with
  any command line arguments", exit 0; not permitted, exit 1.
- The command is looked up in ``secure_path`` (Debian's default), as sudoers does when it is
  set, not in the caller's PATH; the environment is reset (``env_reset``) to what sudo keeps.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from typing import List, Optional, Tuple

from . import hwio

SOCKET_NAME = "sudo.sock"
RELAYED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
USAGE = "usage: sudo [-n] [-l] [-u root] command [arg ...]  (simulated sudo, reprofleet.sim)"


class Usage(Exception):
    pass


def socket_path() -> str:
    return str(hwio.etc_dir() / SOCKET_NAME)


def parse(argv: List[str]) -> Tuple[bool, bool, List[str]]:
    """(non_interactive, list, command): the options sudo takes before the command."""
    non_interactive = listing = False
    rest = list(argv)
    while rest and rest[0].startswith("-") and rest[0] != "-":
        option = rest.pop(0)
        if option == "--":
            break
        if option in ("-u", "--user"):
            if not rest or rest.pop(0) not in ("root", "0", "#0"):
                raise Usage("sudo: the simulated sudo runs commands as root only")
            continue
        if option in ("--non-interactive", "--list"):
            non_interactive, listing = non_interactive or option == "--non-interactive", listing or option == "--list"
            continue
        letters = option[1:]
        if not letters or any(letter not in "nl" for letter in letters):
            raise Usage(f"sudo: invalid option -- '{letters[:1] or option}'\n{USAGE}")
        non_interactive = non_interactive or "n" in letters
        listing = listing or "l" in letters
    if not rest and not listing:
        raise Usage(USAGE)
    return non_interactive, listing, rest


def _send(conn: socket.socket, message: dict, fds: Optional[List[int]] = None) -> None:
    data = (json.dumps(message) + "\n").encode()
    if fds:
        socket.send_fds(conn, [data], fds)
    else:
        conn.sendall(data)


def main(argv: List[str]) -> int:
    try:
        non_interactive, listing, command = parse(argv)
    except Usage as exc:
        print(exc, file=sys.stderr)
        return 1
    if os.getuid() == 0 and not listing:  # root needs no password, and no broker (a root-login host has none)
        os.execvp(command[0], command)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(socket_path())
    except OSError as exc:
        print(f"sudo: unable to reach the host's sudo broker at {socket_path()}: {exc.strerror}", file=sys.stderr)
        return 1
    for number in RELAYED:  # relayed to the command, as sudo(8) relays what it is sent
        signal.signal(number, lambda signum, _frame: _send(conn, {"signal": signum}))
    _send(conn, {"command": command, "list": listing, "non_interactive": non_interactive, "cwd": os.getcwd(),
                 "term": os.environ.get("TERM", ""), "lang": os.environ.get("LANG", "")}, [0, 1, 2])
    reply = json.loads(conn.makefile("rb").readline() or b'{"exit": 1, "error": "sudo: the broker hung up"}')
    if reply.get("error"):
        print(reply["error"], file=sys.stderr)
    if reply.get("print"):
        print(reply["print"])
    status = int(reply.get("exit", 1))
    if status < 0:  # the command died of a signal: so does sudo
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
