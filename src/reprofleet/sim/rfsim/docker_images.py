"""The simulated docker's images: a registry it pulls from and the host's local image store.

Both are files in the host's hw folder (``/etc/reprofleet-sim/hw/docker/``), so they survive
reboots like a real host's disk, and a test can write them from outside:

    registry.json   {tag: {"build": str} | null}   what ``docker pull TAG`` gets (null: unknown tag).
                    A tag not listed is a published image of build "1" (any well-formed tag).
    images.json     {tag: image}                   what the host has (``pull``, or ``run`` pulling it)

An image's id and repo digest are hashes of (tag, build), so a rebuilt image pushed under
the same tag (``move_tag``) has a new id and digest, as on Docker Hub.

Host-side module: standard library only.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any, Dict, Optional

from . import hwio


def docker_dir(hw: Optional[Path] = None) -> Path:
    return (hw or hwio.hw_dir()) / "docker"


def repository(tag: str) -> str:
    """``vllm/vllm-openai:v0.25.1`` -> ``vllm/vllm-openai`` (a port's colon is not a tag's)."""
    name, sep, last = tag.rpartition(":")
    return name if sep and "/" not in last else tag


def normalized(tag: str) -> str:
    """A bare name means ``:latest``, as in docker."""
    return tag if repository(tag) != tag else f"{tag}:latest"


def image_for(tag: str, build: str) -> Dict[str, Any]:
    """The image a registry serves for ``tag`` at ``build``: the fields ``image inspect`` shows."""
    ident = hashlib.sha256(f"image|{tag}|{build}".encode()).hexdigest()
    manifest = hashlib.sha256(f"manifest|{tag}|{build}".encode()).hexdigest()
    return {"Id": f"sha256:{ident}", "RepoTags": [tag], "RepoDigests": [f"{repository(tag)}@sha256:{manifest}"],
            "Created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "Build": build,
            "Os": "linux", "Architecture": "amd64"}


def remote(tag: str, hw: Optional[Path] = None) -> Optional[Dict[str, Any]]:
    """What the registry has under ``tag`` now, or None (unknown tag)."""
    tag = normalized(tag)
    registry = hwio.read_json(docker_dir(hw) / "registry.json", {}) or {}
    if tag in registry and registry[tag] is None:
        return None
    return image_for(tag, str((registry.get(tag) or {}).get("build", "1")))


def local(tag: str, hw: Optional[Path] = None) -> Optional[Dict[str, Any]]:
    """The host's image for ``tag`` (or an image id), or None."""
    images = hwio.read_json(docker_dir(hw) / "images.json", {}) or {}
    if tag.startswith("sha256:"):
        return next((image for image in images.values() if image.get("Id") == tag), None)
    found = images.get(normalized(tag))
    return dict(found) if found else None


def pull(tag: str, hw: Optional[Path] = None) -> Optional[Dict[str, Any]]:
    """Fetch ``tag``'s current image into the local store; None when the registry lacks it."""
    image = remote(tag, hw)
    if image is None:
        return None
    folder = docker_dir(hw)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "images.json"
    with hwio.locked(path):
        images = hwio.read_json(path, {}) or {}
        old = images.get(normalized(tag))
        if old and old.get("Id") == image["Id"]:
            return dict(old)
        images[normalized(tag)] = image
        hwio.write_json(path, images)
    return image


def move_tag(tag: str, build: str, hw: Optional[Path] = None, *, on_host: bool = True) -> Dict[str, Any]:
    """Publish a new image under ``tag`` (a test moving a tag mid-campaign); with ``on_host``
    the host also pulls it, as a cron job or a colleague's ``docker pull`` would."""
    folder = docker_dir(hw)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "registry.json"
    with hwio.locked(path):
        registry = hwio.read_json(path, {}) or {}
        registry[normalized(tag)] = {"build": build}
        hwio.write_json(path, registry)
    image = image_for(normalized(tag), build)
    if on_host:
        pull(tag, hw)
    return image
