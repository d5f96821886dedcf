"""A power cycle the device runs by itself: why, what a driver promises, and the pure choices.

A controller that sends "off", sleeps the dwell and sends "on" strands the host off when it
dies in the dwell (a kill -9, an OOM, a power cut of its own): the host stays off until a
person or the next campaign switches it on. Most power devices can run the whole cycle
themselves, so the "on" happens even if nobody is left to send it:

- APC switched rack PDUs: ``immediateReboot`` (rPDUOutletControlOutletCommand 3, sPDUOutletCtl
  3, rPDU2OutletSwitchedControlCommand 3) switches off, waits the outlet's reboot duration
  (rPDUOutletConfigRebootDuration, 5-60 s) and switches on (PowerNet-MIB);
- IPMI ``chassis power cycle`` (Chassis Control, data 2): "a power off interval of at least
  1 second" (ipmitool(1)); the interval is settable only where the BMC implements the optional
  Set Power Cycle Interval command;
- Redfish ``ComputerSystem.Reset`` with ``PowerCycle``, where the service lists it in
  ``ResetType@Redfish.AllowableValues`` ("behaves like a full power removal, followed by a
  power restore": DMTF Resource schema, ResetType);
- Tasmota ``Backlog Power<N> OFF; Delay <0.1 s>; Power<N> ON``, queued and run by the plug;
- pdudaemon ``/power/control/reboot?...&delay=<s>``: off, sleep, on inside pdudaemon (its
  aiohttp handler is not cancelled when the client goes away);
- Shelly's ``timer``/``toggle_after``: off now, back on after the timer.

The base driver never trusts such a cycle unread: it reads the outlet back off (where the
off window can be seen), waits, reads it back on, and switches on itself if the device did
not by the settle time. A driver describes what it arranged with a :class:`DeviceCycle`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

__all__ = ["DeviceCycle", "covers", "seconds_at_least", "choice_at_least"]

SLACK_S = 0.05  # rounding: a device that keeps it off 4.99 s for a 5 s dwell is close enough


@dataclass(frozen=True)
class DeviceCycle:
    """What a driver asked the device to do: off now, back on after ``off_s`` by itself."""

    off_s: float | None  # how long the device keeps the outlet off; None: the device's own interval (unknown)
    visible: bool = True  # the off can be read back before the device switches on again
    watch_s: float = 0.0  # not visible: how long to watch for the off (a BMC may apply late); 0: do not watch
    note: str = ""  # what was asked of the device, for the power log

    def describe(self, dwell_s: float) -> str:
        held = f"off {self.off_s:g} s" if self.off_s is not None else "off for the device's own interval"
        asked = f" (dwell asked {dwell_s:g} s)" if self.off_s is None or abs(self.off_s - dwell_s) > SLACK_S else ""
        return f"the device's own cycle, {held}{asked}" + (f"; {self.note}" if self.note else "")


def covers(plan: DeviceCycle, dwell_s: float) -> bool:
    """Does the device keep the outlet off at least the dwell asked? (unknown intervals are the device's)."""
    return plan.off_s is None or plan.off_s + SLACK_S >= dwell_s


def seconds_at_least(dwell_s: float, low: int, high: int) -> int | None:
    """The whole seconds in ``low..high`` nearest above ``dwell_s``; None when it is past ``high``."""
    wanted = max(low, math.ceil(dwell_s - SLACK_S))
    return wanted if wanted <= high else None


def choice_at_least(dwell_s: float, choices: Sequence[int]) -> int | None:
    """The smallest allowed value that is at least ``dwell_s``; None when every one is shorter."""
    fitting = [value for value in sorted(choices) if value + SLACK_S >= dwell_s]
    return fitting[0] if fitting else None
