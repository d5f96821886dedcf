"""The reproducer's command line on a host, from a cell's runtime, env and arguments.

The same PoC script runs under docker (the seed's ``docker run ... vllm/vllm-openai``) or a
host Python with vLLM installed; the cache folder is bind-mounted (docker) or pointed at by
``VLLM_CACHE_ROOT`` (python) so a persistent cache carries over between attempts as in the
seed. Every other cache the engine keeps is pointed into that folder too
(``ENGINE_CACHE_ROOTS``), so the cache mode (fresh, persistent, seeded, harvest) covers it.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprofleet.model import Cell, RuntimeKind
from reprofleet.runner.cache_sync import CacheError
from reprofleet.runner.runtimes import venv_python

CONTAINER_CACHE = "/root/.cache/vllm"
# Caches a vLLM start writes outside VLLM_CACHE_ROOT by default, each moved to a folder of the
# attempt's cache. Read from vLLM 0.26.0-0.34.0 and FlashInfer 0.7 (vllm/snapshot/runtime.py
# names the same three as the engine's generated caches):
# - FlashInfer's managed autotune store (vLLM 0.33+: "Using FlashInfer managed autotune cache
#   (root=flashinfer default)", flashinfer/autotune_cache.py: FLASHINFER_AUTOTUNE_CACHE_DIR, else
#   ~/.cache/flashinfer/autotune). vLLM's own VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR is left alone:
#   in 0.25/0.26 it would also move the per-config autotune file, already under VLLM_CACHE_ROOT,
#   out of its FlashInfer-version/arch folders.
# - FlashInfer's JIT kernels and cubins (flashinfer/jit/env.py: FLASHINFER_WORKSPACE_BASE, else
#   the home folder, + .cache/flashinfer; the managed store's default sits below it too).
# - Triton's kernel cache (TRITON_CACHE_DIR, else ~/.triton/cache).
ENGINE_CACHE_ROOTS: tuple[tuple[str, str], ...] = (
    ("FLASHINFER_AUTOTUNE_CACHE_DIR", "flashinfer_autotune"),
    ("FLASHINFER_WORKSPACE_BASE", "flashinfer_workspace"),
    ("TRITON_CACHE_DIR", "triton"),
)
CONTAINER_POC = "/poc.py"
ATTEMPT_LABEL = "reprofleet.attempt"  # every container an attempt starts carries it: found and killed later by it


def container_name(attempt_id: str) -> str:
    """The docker name of an attempt's container: ``docker kill`` finds it by this even after
    the controller, the agent and the ``docker run`` client are all gone (the container
    belongs to containerd's shim, not to its client)."""
    return "reprofleet-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", attempt_id)


@dataclass(frozen=True)
class PocCommand:
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]  # for the agent's --env (the PoC process's environment)
    cache_dir: str
    container: str | None = None  # docker: the container's name, for ``docker kill``
    secret_names: tuple[str, ...] = ()  # env_secrets: the agent puts their values in the PoC's environment


def poc_flags(args: tuple[tuple[str, Any], ...]) -> list[str]:
    """PoC arguments as flags: spec_tokens=9 -> --spec-tokens 9; True -> a bare flag."""
    flags: list[str] = []
    for key, value in args:
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is False or value is None:
            continue
        else:
            flags += [flag, str(value)]
    return flags


def cache_key(cell: Cell) -> str:
    """One persistent cache per runtime: vLLM caches differ between versions."""
    return cache_key_for_label(cell.runtime.label)


def cache_key_for_label(label: str) -> str:
    """The cache folder's name for a runtime label (a docker image, a python path)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", label)[-40:]
    return f"{slug}-{hashlib.sha256(label.encode()).hexdigest()[:8]}"


def engine_cache_env(cache_root: str) -> dict[str, str]:
    """The environment that puts every cache in ``ENGINE_CACHE_ROOTS`` under ``cache_root``
    (the cache folder as the PoC sees it: the host path, or the container's mount)."""
    return {name: f"{cache_root}/{folder}" for name, folder in ENGINE_CACHE_ROOTS}


def build(cell: Cell, *, poc_path: str, state_root: str, attempt_id: str, persistent: bool, gpu: int,
          seeded: bool = False, secret_names: tuple[str, ...] = ()) -> PocCommand:
    """The argv and environment that start one attempt of ``cell`` on a host. A seeded
    cache has a folder of its own per runtime, rebuilt before each attempt (never the
    persistent one). ``secret_names`` (env_secrets) appear by name only: docker gets
    ``--env NAME`` and copies the value from its own environment, where the agent put it."""
    folder = f"seeded-{cache_key(cell)}" if seeded else cache_key(cell) if persistent else f"fresh-{attempt_id}"
    cache_dir = f"{state_root}/cache/{folder}"
    flags = poc_flags(cell.args)
    env = dict(cell.env)
    if cell.runtime.kind is RuntimeKind.DOCKER:
        env = {**engine_cache_env(CONTAINER_CACHE), **env}  # a cell's own setting wins
        name = container_name(attempt_id)
        # --init: a real init as PID 1, so the container's processes get the signals docker sends.
        argv = ["docker", "run", "--rm", "--init", "--name", name, "--label", f"{ATTEMPT_LABEL}={attempt_id}",
                "--gpus", f"device={gpu}", *cell.runtime.docker_args]
        for key, value in sorted(env.items()):
            argv += ["--env", f"{key}={value}"]
        for name in sorted(secret_names):
            argv += ["--env", name]  # the name alone: the value never reaches an argv
        argv += [
            "--mount", f"type=bind,src={cache_dir},dst={CONTAINER_CACHE}",
            "--mount", f"type=bind,src={poc_path},dst={CONTAINER_POC},readonly",
            "--entrypoint", "python3", str(cell.runtime.image), CONTAINER_POC, *flags,
        ]
        return PocCommand(tuple(argv), (), cache_dir, container=name, secret_names=tuple(sorted(secret_names)))
    env.setdefault("VLLM_CACHE_ROOT", cache_dir)
    for name, value in engine_cache_env(cache_dir).items():
        env.setdefault(name, value)
    env.setdefault("CUDA_VISIBLE_DEVICES", str(gpu))
    # CUDA counts devices fastest first by default, NVML by PCI bus: on a host with two
    # different GPUs the index names another card unless CUDA counts the way NVML does.
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    python = venv_python(state_root, cell.runtime) if cell.runtime.kind is RuntimeKind.VENV else cell.runtime.python
    argv = [python or "python3", poc_path, *flags]
    return PocCommand(tuple(argv), tuple(sorted(env.items())), cache_dir, secret_names=tuple(sorted(secret_names)))


def cache_seed_archive(folder: str) -> tuple[bytes, str]:
    """The playbook's starting cache as a reproducible tar.gz, and its hash (names the upload).

    As the seeded path's snapshot (cache_sync.build_snapshot): regular files only. A
    symlink would arrive as a link the PoC writes through (``link -> /etc/hostname``), a
    device or FIFO as one on the host, so either refuses the campaign before a host is
    asked; a mode keeps its permission bits only (no setuid, setgid or sticky bit)."""
    buffer = io.BytesIO()
    root = Path(folder)
    files = []
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            raise CacheError(f"{path} is not a regular file: a starting cache holds bytes, not links or devices")
        if path.is_file():
            files.append(path)
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as archive:
        for path in files:
            info = archive.gettarinfo(str(path), arcname=str(path.relative_to(root)))
            if not info.isreg():  # replaced between the walk and here
                raise CacheError(f"{path} is not a regular file: a starting cache holds bytes, not links or devices")
            info.mode &= 0o777
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            with open(path, "rb") as handle:
                archive.addfile(info, handle)
    content = buffer.getvalue()
    return content, hashlib.sha256(content).hexdigest()[:12]
