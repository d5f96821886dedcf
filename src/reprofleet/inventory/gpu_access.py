"""The inventory's ``gpu_policy`` variable: may a campaign change this host's GPU settings?

A lab also has machines it does not own (a shared box, a cloud GPU) where clocks, power
limit and persistence must stay as their owner left them. ``gpu_policy: observe`` marks
such a host; ``manage`` (the default) lets the controller set and restore them. A separate
module because it is one variable with one rule, checked where it becomes a setting: any
other value is one line naming file:line:gpu_policy.
"""

from __future__ import annotations

from reprofleet.errors import InventoryError
from reprofleet.model import GpuAccess
from reprofleet.suggest import did_you_mean

from reprofleet.inventory.values import Sourced

VARIABLE = "gpu_policy"
CHOICES = tuple(access.value for access in GpuAccess)


def gpu_access(item: Sourced | None) -> GpuAccess:
    """The host's GPU access from its merged ``gpu_policy`` (absent: ``manage``)."""
    if item is None:
        return GpuAccess.MANAGE
    value = item.value
    if isinstance(value, str) and value.strip().lower() in CHOICES:
        return GpuAccess(value.strip().lower())
    hint = did_you_mean(value, CHOICES) if isinstance(value, str) else ""
    raise InventoryError(item.where, f"must be {' or '.join(CHOICES)} (observe: never change this host's GPU "
                                     f"settings), got {value!r}{hint}")
