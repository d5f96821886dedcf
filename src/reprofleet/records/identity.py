"""What makes two cells the same experiment: their resolved settings, runtime and PoC.

Reports pool cells from many campaigns and controllers. Pooling by name alone would merge
two ``default`` cells that ran different images or different PoC scripts, so a cell's
identity is its name plus a short hash of everything that defines what ran. Records carry
it (``cell_id``); a record written before it existed gets it computed from its own fields.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

# Runtime keys that say what software ran (a digest joins them once recorded); the rest
# (labels, cache keys) describe how the controller named things, not what ran.
RUNTIME_IDENTITY_KEYS = ("kind", "label", "image", "image_digest", "image_id", "python", "versions")


def content_hash(factors: Mapping[str, Any], runtime: Mapping[str, Any] | None, poc: str | None) -> str:
    """A short, stable hash of a cell's resolved factors, its runtime and its PoC digest."""
    body = {
        "factors": factors,
        "runtime": {k: v for k, v in (runtime or {}).items() if k in RUNTIME_IDENTITY_KEYS and v is not None},
        "poc": poc,
    }
    text = json.dumps(body, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def cell_id(name: str, factors: Mapping[str, Any], runtime: Mapping[str, Any] | None, poc: str | None) -> str:
    return f"{name}@{content_hash(factors, runtime, poc)}"


def record_cell_id(record: Mapping[str, Any]) -> str:
    """The identity a record carries, or the one its own fields imply (older records)."""
    stored = record.get("cell_id")
    if isinstance(stored, str) and stored:
        return stored
    return cell_id(str(record.get("cell")), record.get("factors") or {}, record.get("runtime"), record.get("poc"))


def cell_name(identity: str) -> str:
    return identity.split("@", 1)[0]


# A stratum of an identity (``pooling.Pool.strata``): what it ran under, after this mark.
STRATUM_MARK = "~"
DEPARTED = "read back: "  # the GPU settings read back other than planned


def departed_mark(departures: tuple[str, ...]) -> str:
    return DEPARTED + ", ".join(departures)


def stratum_of(identity: str) -> str:
    """What a stratum's identity says it ran under ("" for a plain identity)."""
    return identity.split(STRATUM_MARK, 1)[1] if STRATUM_MARK in identity else ""


def departed(identity: str) -> bool:
    """A stratum whose GPU settings read back other than its cell planned."""
    return DEPARTED in stratum_of(identity)
