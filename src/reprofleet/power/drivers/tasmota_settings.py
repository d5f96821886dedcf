"""A Tasmota relay's own behaviour, from its commands: pure parsers of the replies.

Every Tasmota command without an argument answers its current value (the Commands docs):

- ``PowerOnState`` -> ``{"PowerOnState": N}``: 0 off after power-up, 1 on, 2 toggle from the
  saved state, 3 the saved state (the default), 4 on and further relay control disabled,
  5 on after a PulseTime period (inverted PulseTime);
- ``PulseTime<relay>`` -> ``{"PulseTime1": {"Set": N, "Remaining": M}}`` (older firmware:
  ``{"PulseTime1": N}``): the relay switches off N after each "on"; 0 disabled, 1..111 tenths
  of a second, 112 and up N - 100 seconds;
- ``MaxPower`` -> ``{"MaxPower": W}``: the energy monitor switches the relay off above W
  (0 disabled); a build without the energy-limit commands answers ``{"Command": "Unknown"}``;
- ``SetOption73`` -> ``{"SetOption73": "ON"}``: buttons detached from the relays (a press no
  longer switches the outlet).
"""

from __future__ import annotations

from typing import Any

from reprofleet.power.plug_behaviour import AUTO_OFF, CHILD_LOCK, POWER_LIMIT, POWER_ON, PlugSettings, PowerOnState

POWER_ON_STATES = {0: PowerOnState.OFF, 1: PowerOnState.ON, 2: PowerOnState.TOGGLE, 3: PowerOnState.LAST,
                   4: PowerOnState.ON_LOCKED, 5: PowerOnState.ON}
TENTHS_UP_TO = 111  # PulseTime 1..111: tenths of a second; from 112: value - 100 seconds


def pulse_seconds(value: int) -> float:
    """A ``PulseTime`` value in seconds (0: disabled)."""
    if value <= 0:
        return 0.0
    return value / 10 if value <= TENTHS_UP_TO else float(value - 100)


def _value(reply: Any, key: str) -> Any:
    """The reply's value for ``key`` (Tasmota answers keys as it spells them: match any case)."""
    if not isinstance(reply, dict) or str(reply.get("Command", "")).lower() == "unknown":
        return None
    for name, value in reply.items():
        if name.lower() == key.lower():
            return value
    return None


def _whole(value: Any) -> int | None:
    if isinstance(value, dict):
        value = value.get("Set")
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    return int(value) if isinstance(value, str) and value.strip().isdigit() else None


def tasmota_settings(relay: str, power_on: Any, pulse: Any, max_power: Any, buttons: Any) -> PlugSettings:
    """The four commands' replies -> PlugSettings (an unknown command or reply: not reported)."""
    state, pulse_value = _whole(_value(power_on, "PowerOnState")), _whole(_value(pulse, f"PulseTime{relay}"))
    limit, detached = _whole(_value(max_power, "MaxPower")), _value(buttons, "SetOption73")
    seconds = pulse_seconds(pulse_value) if pulse_value is not None else None
    return PlugSettings(
        power_on=POWER_ON_STATES.get(state) if state is not None else None, auto_off_s=seconds,
        power_limit_w=float(limit) if limit is not None else None,
        child_lock={"ON": True, "OFF": False}.get(str(detached).upper()) if detached is not None else None,
        said={POWER_ON: f"PowerOnState {state}", AUTO_OFF: f"PulseTime{relay} {pulse_value} ({seconds:g} s)"
              if seconds is not None else "", POWER_LIMIT: f"MaxPower {limit} W", CHILD_LOCK: f"SetOption73 {detached}"},
        fixes={POWER_ON: "PowerOnState 1", AUTO_OFF: f"PulseTime{relay} 0", POWER_LIMIT: "MaxPower 0",
               CHILD_LOCK: "SetOption73 1"})
