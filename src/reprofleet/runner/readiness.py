"""Can this host run its plan at all? Decided from its facts before its first attempt.

A host without ``nvidia-smi``, without the rights to use its setters, without NVML, with no
GPU at the inventory's index, or without docker or the NVIDIA container runtime for its
docker cells would otherwise burn its whole plan as ``infra`` in seconds and be reported as
if it had run. Each problem is one line naming what is missing and how to fix it; the host
is quarantined with them and no attempt starts on it.

Only facts the agent sent are judged: a key it did not send is unknown, never a problem.
An observe-only host (``gpu_policy: observe``) never runs a setter, so neither nvidia-smi
nor the rights to use it are asked of it: a cloud GPU whose user is not root can run there.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from reprofleet.model import Cell, Host, RuntimeKind


def problems(host: Host, cells: Iterable[Cell], facts: Mapping[str, Any]) -> list[str]:
    """What stops ``host`` from running ``cells``, one line each ([] when it can)."""
    cells = list(cells)
    found = _nvml(host, facts) + ([] if host.observe_only else _nvidia_smi(facts))
    if any(cell.runtime.kind is RuntimeKind.DOCKER for cell in cells):
        found += _docker(facts)
    return found


def _nvml(host: Host, facts: Mapping[str, Any]) -> list[str]:
    nvml = facts.get("nvml")
    if nvml is not None and nvml != "ok":
        return [f"NVML cannot be used on the host ({nvml}): install the NVIDIA driver (libnvidia-ml.so.1)"]
    if "gpus" not in facts or nvml is None:
        return []
    gpus = {int(g["index"]): g for g in facts.get("gpus") or [] if isinstance(g, Mapping) and "index" in g}
    gpu = gpus.get(host.gpu_index)
    if gpu is None:
        have = ", ".join(map(str, sorted(gpus))) or "none"
        return [f"no GPU at index {host.gpu_index} (NVML lists: {have}): set gpu_index in the inventory"]
    if gpu.get("error"):
        return [f"GPU {host.gpu_index} does not answer NVML ({gpu['error']}): it may have fallen off the bus; "
                "power-cycle the host (a warm reset may not bring it back)"]
    return []


def _nvidia_smi(facts: Mapping[str, Any]) -> list[str]:
    """Every boot's policy is applied (the default cell's too: locks reset) through nvidia-smi."""
    if "nvidia_smi" in facts and not facts["nvidia_smi"]:
        return ["nvidia-smi not found on PATH: install the NVIDIA driver's utilities (e.g. nvidia-utils-<version>)"]
    if facts.get("privilege") == "none":
        return ["nvidia-smi's setters need root: connect as root (ansible_user), or allow this user "
                "`sudo -n nvidia-smi` without a password"]
    return []


def _docker(facts: Mapping[str, Any]) -> list[str]:
    if "docker" in facts and not facts["docker"]:
        return ["docker is not installed or its daemon does not answer: install and start docker, "
                "or give the cells a python or venv runtime"]
    runtimes = facts.get("docker_runtimes")
    if isinstance(runtimes, list) and "nvidia" not in runtimes:
        return ["docker has no nvidia runtime (docker info lists: " + ", ".join(map(str, runtimes)) + "): install "
                "the NVIDIA Container Toolkit and run `nvidia-ctk runtime configure --runtime=docker`"]
    return []
