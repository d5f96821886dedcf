"""A campaign's power control: the one power log every host's recovery appends to, and the
folder of the device locks every controller writing under the same reports folder shares."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reprofleet.power.locks import lock_folder
from reprofleet.power.log import PowerLog

__all__ = ["PowerControl", "power_control"]


@dataclass(frozen=True)
class PowerControl:
    """What a campaign that may switch power holds once, for every host's recovery."""

    power_log: PowerLog
    lock_dir: Path


def power_control(campaign_root: Path, power_log_path: Path) -> PowerControl:
    """The power control of the campaign in ``campaign_root`` (its locks beside the campaign folders)."""
    return PowerControl(PowerLog(power_log_path), lock_folder(campaign_root.parent))
