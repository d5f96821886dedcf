"""What a metering PDU or BMC reads at the wall for a simulated host: nothing when its
switch is off, else the board plus what the simulated GPU draws right now.

The GPU's draw comes from the same model nvidia-smi reads on the host (``rfsim.telemetry``
over the card's state and load files in ``<host>/hw``), so a host frozen under load reads
~400-600 W at the wall and one frozen idle ~120 W: the controller can tell them apart when
NVML on the frozen host cannot be asked. A switch file outside a simulated host (a test's
tmp file) has no GPU files and reads as an idle card.
"""

from __future__ import annotations

import time
from pathlib import Path

from ..rfsim import gpu, telemetry
from .switch import read_switch

BOARD_W = 85.0  # CPUs, board, fans and supply losses of an idle host


def wall_watts(switch: Path, now: float | None = None) -> float:
    """Watts the outlet feeding ``switch``'s host delivers now."""
    if not read_switch(switch):
        return 0.0
    hw, now = switch.parent, time.time() if now is None else now
    total = BOARD_W
    try:
        count = gpu.gpu_count(hw)
    except OSError:
        count = 0
    for index in range(count):
        try:
            total += telemetry.sample(gpu.read_state(index, hw), gpu.read_load(index, hw), now).power_w
        except (OSError, ValueError):
            total += gpu.IDLE_POWER_W
    if count == 0:
        total += gpu.IDLE_POWER_W
    return round(total, 1)
