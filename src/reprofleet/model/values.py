"""What every value type here shares: read-only mappings for frozen dataclass fields."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping


def frozen_mapping(values: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    """A read-only view of a copy of ``values`` (for dataclass fields)."""
    return MappingProxyType(dict(values or {}))
