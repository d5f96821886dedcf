"""``agent.py runtime``: what software a cell would really run on this host.

A tag like ``vllm/vllm-openai:v0.25.1`` can point at different images over time, and a
host Python's vLLM can be upgraded under a campaign; the controller records what this
module reports, never only the name the playbook used.

    runtime image --json '{"image": TAG, "pull": true}'   find (or pull) an image: its id and repo digests
    runtime python --json '{"python": PATH}'              the interpreter and its vllm/torch/flashinfer/triton
    runtime venv --json '{"vllm": V, "requirement": R, "index_url": .., "find_links": [..], "no_index": b,
                          "pins": [..], "name": N}'       a venv per vLLM version, created once, then probed

Package versions come from distribution metadata (importlib.metadata) in the runtime's
own interpreter: importing vllm takes many seconds and may touch the GPU.

Host-side module: standard library only.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from typing import Any, Dict, List, Optional

# dist names per reported package; the first one installed wins
PACKAGES = (("vllm", ("vllm",)), ("torch", ("torch",)), ("flashinfer", ("flashinfer-python", "flashinfer")),
            ("triton", ("triton",)))
COMPLETE = ".reprofleet-complete"  # written last, atomically: a venv without it is half-built
PROBE_TIMEOUT_S = 60.0
DOCKER_TIMEOUT_S = 120.0
PULL_TIMEOUT_S = 3600.0
VENV_TIMEOUT_S = 3600.0

PROBE_SNIPPET = r"""
import json, platform, sys
try:
    from importlib import metadata
except ImportError:
    metadata = None
wanted = json.loads(sys.argv[1])
versions = {}
for name, dists in wanted:
    versions[name] = None
    for dist in dists:
        try:
            versions[name] = metadata.version(dist) if metadata else None
        except Exception:
            continue
        if versions[name]:
            break
print(json.dumps({"path": sys.executable, "version": platform.python_version(), "packages": versions}))
"""


def probe_python(python: str) -> Dict[str, Any]:
    """The interpreter's own path and version, and the package versions its metadata names."""
    try:
        # from /, so that a folder named vllm in the agent's cwd cannot shadow the installed one;
        # PYTHONPATH applies, as it does to the PoC
        done = subprocess.run([python, "-c", PROBE_SNIPPET, json.dumps(PACKAGES)], capture_output=True, cwd="/",
                              text=True, timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"ok": False, "error": "cannot run %s: %s" % (python, exc)}
    if done.returncode != 0:
        return {"ok": False, "error": "%s exited %d: %s" % (python, done.returncode, done.stderr.strip()[-500:])}
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": False, "error": "%s printed no probe line: %r" % (python, done.stdout[-200:])}
    return {"ok": True, "interpreter": {"path": found["path"], "version": found["version"]},
            "packages": found["packages"]}


def _docker(args: List[str], timeout: float) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(["docker"] + args, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def inspect_image(image: str) -> Optional[Dict[str, Any]]:
    """The local image's id and repo digests, or None when the host does not have it."""
    ident = _docker(["image", "inspect", "--format", "{{.Id}}", image], DOCKER_TIMEOUT_S)
    if ident.returncode != 0:
        return None
    digests = _docker(["image", "inspect", "--format", "{{json .RepoDigests}}", image], DOCKER_TIMEOUT_S)
    try:
        repo_digests = json.loads(digests.stdout.strip() or "[]") if digests.returncode == 0 else []
    except ValueError:
        repo_digests = []
    return {"id": ident.stdout.strip(), "repo_digests": list(repo_digests or [])}


def image(settings: Dict[str, Any]) -> Dict[str, Any]:
    """Find ``image`` locally, else pull it (when allowed) and look again."""
    name = str(settings.get("image") or "")
    if not name:
        return {"ok": False, "error": "no image named"}
    try:
        found = inspect_image(name)
        pulled = False
        if found is None and settings.get("pull", True):
            pull = _docker(["pull", name], PULL_TIMEOUT_S)
            if pull.returncode != 0:
                return {"ok": False, "image": name, "error": "docker pull %s failed: %s"
                        % (name, (pull.stderr or pull.stdout).strip()[-500:])}
            pulled, found = True, inspect_image(name)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"ok": False, "image": name, "error": "docker: %s" % exc}
    if found is None:
        return {"ok": False, "image": name, "error": "the host has no image %s" % name}
    return {"ok": True, "image": name, "pulled": pulled, **found}


def venv(state_dir: str, settings: Dict[str, Any]) -> Dict[str, Any]:
    """The venv for one vLLM version: built once (under a lock), then probed like any python."""
    root = os.path.join(state_dir, "venvs")
    os.makedirs(root, exist_ok=True)
    folder = os.path.join(root, str(settings["name"]))
    with open(folder + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        created = False
        log = ""
        if not os.path.exists(os.path.join(folder, COMPLETE)):
            built = _build_venv(folder, settings)
            if not built["ok"]:
                return built
            created, log = True, built["log"]
    probe = probe_python(os.path.join(folder, "bin", "python"))
    if not probe["ok"]:
        return probe
    return {**probe, "venv": folder, "created": created, "log": log[-2000:]}


def pip_args(settings: Dict[str, Any]) -> List[str]:
    """pip's options and requirements: vllm at the asked version, within the ``poc`` extra's pin."""
    args = ["install", "--no-input", "--disable-pip-version-check"]
    if settings.get("no_index"):
        args.append("--no-index")
    if settings.get("index_url"):
        args += ["--index-url", str(settings["index_url"])]
    for link in settings.get("find_links") or ():
        args += ["--find-links", str(link)]
    args.append("vllm==%s" % settings["vllm"])
    if settings.get("requirement"):
        args.append(str(settings["requirement"]))  # the pin itself, e.g. vllm>=0.25: pip checks both agree
    return args + [str(pin) for pin in settings.get("pins") or ()]


def _build_venv(folder: str, settings: Dict[str, Any]) -> Dict[str, Any]:
    """A fresh venv (a half-built one is removed first); marked complete only once pip succeeded."""
    if os.path.exists(folder):
        shutil.rmtree(folder)
    started = time.time()
    base = str(settings.get("base_python") or "python3")
    steps = [[base, "-m", "venv", folder], [os.path.join(folder, "bin", "python"), "-m", "pip"] + pip_args(settings)]
    log: List[str] = []
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=VENV_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"ok": False, "error": "%s: %s" % (" ".join(step[:3]), exc)}
        log.append(done.stdout + done.stderr)
        if done.returncode != 0:
            return {"ok": False, "error": "%s exited %d: %s" % (" ".join(step[:4]), done.returncode,
                                                                 (done.stderr or done.stdout).strip()[-800:])}
    marker = os.path.join(folder, COMPLETE)
    tmp = marker + ".tmp"
    with open(tmp, "w") as out:
        json.dump({"settings": settings, "built_s": round(time.time() - started, 3), "t": time.time()}, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, marker)
    return {"ok": True, "log": "\n".join(log)}


def command(state_dir: str, action: str, raw: Optional[str]) -> Dict[str, Any]:
    """One ``runtime`` line for the agent to emit (``ok`` false says why)."""
    try:
        settings = json.loads(raw or "{}")
    except ValueError as exc:
        return {"k": "runtime", "ok": False, "error": "--json is not JSON: %s" % exc}
    if action == "image":
        report = image(settings)
    elif action == "python":
        report = probe_python(str(settings.get("python") or "python3"))
    else:
        if not settings.get("vllm") or not settings.get("name"):
            return {"k": "runtime", "ok": False, "error": "venv needs vllm and name"}
        report = venv(state_dir, settings)
    return {"k": "runtime", "action": action, **report}
