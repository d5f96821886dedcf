"""What consumer plugs do on their own right after they were switched: the faults a driver's
read-back must catch.

- ``overload_trip``: the plug switched on and its overload protection switched it off again at
  once (Tapo P110/P115 and Kasa KP115/HS110 firmware: "overload protection"; Shelly's
  ``power_limit``): the outlet reads off after an "on";
- ``app_switch``: someone switched the outlet back from the vendor's app, a schedule or an
  automation between the switch and its read-back: the outlet reads the opposite of what was asked.

Both act on the outlet's switch file, so the simulated host behind it loses (or keeps) power
exactly as the read-back says.
"""

from __future__ import annotations

from enum import Enum, unique
from pathlib import Path

from .switch import write_switch


@unique
class AfterSwitch(str, Enum):
    """What the plug does by itself right after a switch command."""

    NONE = "none"
    OVERLOAD_TRIP = "overload_trip"
    APP_SWITCH = "app_switch"


def switch_outlet(switch: Path, on: bool, after: AfterSwitch) -> None:
    """Switch as asked, then let ``after`` happen (the final state is what the plug reports)."""
    write_switch(switch, on)
    if after is AfterSwitch.OVERLOAD_TRIP and on:
        write_switch(switch, False)
    elif after is AfterSwitch.APP_SWITCH:
        write_switch(switch, not on)
