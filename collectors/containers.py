"""The docker container an attempt started: found by name and label, stopped by docker.

A container does not die with its ``docker run`` client: it belongs to containerd's shim (a
process group and session of its own, reparented away from the client, without our
environment marker), so SIGKILL of the client - the supervisor's timeout, a dead
supervisor's orphan kill - leaves it on the GPU. The agent therefore asks docker itself:
``docker kill NAME`` at every end of an attempt that has a container, and
``docker ps --filter label=reprofleet.attempt`` to find containers whose supervisor is gone.

Every call is bounded (a daemon that does not answer is an error string, not a hang) and
never raises: a host without docker, a refused socket, a container already gone are all
answers.

Standard library only; never imports reprofleet.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any, Dict, List, Optional, Tuple

import attempt_state as state

ATTEMPT_LABEL = "reprofleet.attempt"  # set by the controller on every container an attempt starts
NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,254}$")  # docker's container names
KILL_TIMEOUT_S = 15.0
LIST_TIMEOUT_S = 10.0
GONE = ("No such container", "is not running")  # docker kill's answers for a container that is not running


def valid_name(name: str) -> bool:
    return bool(NAME.match(name))


def _docker(args: List[str], timeout_s: float) -> Tuple[Optional[int], str, str]:
    """(exit status or None, stdout, stderr) of one docker call; an OSError or a timeout is
    None with the reason in stderr."""
    docker = shutil.which("docker")
    if docker is None:
        return None, "", "docker is not installed on this host"
    try:
        done = subprocess.run([docker, *args], stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s,
                              env=_environment())
    except subprocess.TimeoutExpired:
        return None, "", "docker %s did not answer in %g s" % (args[0], timeout_s)
    except OSError as exc:
        return None, "", "cannot run docker: %s" % exc
    return done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")


def _environment() -> Dict[str, str]:
    """The agent's environment less the attempt marker: docker is not the PoC."""
    env = dict(os.environ)
    env.pop(state.ATTEMPT_ENV, None)
    return env


def kill(name: str, timeout_s: float = KILL_TIMEOUT_S) -> Dict[str, Any]:
    """``docker kill NAME``: ``container_killed`` is true only when docker killed a running
    container; one that is gone already (``--rm`` after its own end) is false without an
    error; anything else docker said is ``container_error``."""
    rc, _out, err = _docker(["kill", name], timeout_s)
    result: Dict[str, Any] = {"container": name, "container_killed": rc == 0}
    if rc != 0 and not any(words in err for words in GONE):
        result["container_error"] = (err.strip() or "docker kill exited %s" % rc)[-500:]
    return result


def exists(name: str, timeout_s: float = 10.0) -> bool:
    """Has docker made the container ``name`` (running or not)?"""
    rc, _out, _err = _docker(["container", "inspect", "--format", "{{.Id}}", name], timeout_s)
    return rc == 0


def running_by_label(timeout_s: float = LIST_TIMEOUT_S) -> Tuple[List[Dict[str, str]], Optional[str]]:
    """The running containers labelled with an attempt id: ([{"id", "container",
    "container_id"}], error or None). A host without docker has none, and no error."""
    if shutil.which("docker") is None:
        return [], None
    template = '{{.ID}}\t{{.Names}}\t{{.Label "%s"}}' % ATTEMPT_LABEL
    rc, out, err = _docker(["ps", "--no-trunc", "--filter", "label=" + ATTEMPT_LABEL, "--format", template], timeout_s)
    if rc != 0:
        return [], (err.strip() or "docker ps exited %s" % rc)[-500:]
    found = []
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and state.valid_attempt_id(parts[2]):
            found.append({"container_id": parts[0], "container": parts[1].split(",")[0], "id": parts[2]})
    return found, None


def with_containers(state_dir: str, listed: List[Dict[str, Any]], running_only: bool) -> Dict[str, Any]:
    """The ``attempts`` reply: ``listed`` (host_lease.attempts) with every running container
    of an attempt whose supervisor is gone marked ``running`` (``container``, ``supervisor_alive``
    false) - added when the attempt is not listed - so that orphan reconciliation kills it."""
    found, error = running_by_label()
    by_id = {entry["id"]: entry for entry in listed}
    for container in found:
        entry = by_id.get(container["id"])
        if entry is not None and entry.get("status") == "running":
            entry["container"] = container["container"]  # its live supervisor stops it
            continue
        if entry is None:
            entry = by_id[container["id"]] = _unlisted(state_dir, container["id"])
            listed.append(entry)
        entry.update(status="running", container=container["container"], supervisor_alive=False,
                     reason="container %s still runs; its supervisor is gone" % container["container"])
    reply: Dict[str, Any] = {"k": "attempts",
                             "attempts": [e for e in listed if not running_only or e.get("status") == "running"]}
    if error:
        reply["notes"] = ["containers not listed: %s" % error]
    return reply


def _unlisted(state_dir: str, attempt_id: str) -> Dict[str, Any]:
    """An entry for an attempt the listing left out (older than its limit, or no folder)."""
    meta = state.read_json(os.path.join(state.attempt_dir(state_dir, attempt_id), state.META)) or {}
    return {"id": attempt_id, "status": "running", "created": meta.get("created"),
            "age_s": round(state.age_s(meta), 1) if meta else None, "boot_id": meta.get("boot_id"),
            "exit": None, "reason": None}
