"""A Shelly relay's own behaviour, from its configuration: pure parsers of the replies.

Gen1: ``GET /settings/relay/<id>`` answers ``default_state`` (``off`` | ``on`` | ``last`` |
``switch``: the state after power-on), ``auto_off`` (seconds after an "on" the relay switches
itself off; 0 disabled) and, on plugs with a meter, ``max_power`` (W above which it switches
off; on some models it sits in ``/settings`` only). Settings change with the same path and
the setting as a query parameter (``?default_state=on``).

Gen2+: ``Switch.GetConfig {id}`` answers ``initial_state`` (``off`` | ``on`` |
``restore_last`` | ``match_input``), ``auto_off`` (bool) with ``auto_off_delay`` (seconds),
and on metered switches ``power_limit`` (W); ``Switch.SetConfig {id, config: {...}}`` changes
them. Neither generation has a child lock on its relays: the plug's button is reported unknown.
"""

from __future__ import annotations

from typing import Any

from reprofleet.errors import PowerError
from reprofleet.power.plug_behaviour import AUTO_OFF, POWER_LIMIT, POWER_ON, PlugSettings, PowerOnState

GEN1_POWER_ON = {"off": PowerOnState.OFF, "on": PowerOnState.ON, "last": PowerOnState.LAST,
                 "switch": PowerOnState.FOLLOWS_INPUT}
GEN2_POWER_ON = {"off": PowerOnState.OFF, "on": PowerOnState.ON, "restore_last": PowerOnState.LAST,
                 "match_input": PowerOnState.FOLLOWS_INPUT}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def gen1_settings(reply: Any, relay: str) -> PlugSettings:
    """``GET /settings/relay/<id>``'s reply -> PlugSettings (a missing field: not reported)."""
    if not isinstance(reply, dict):
        raise PowerError(f"GET /settings/relay/{relay}: reply is not an object: {reply!r}")
    state, auto_off, limit = reply.get("default_state"), _number(reply.get("auto_off")), _number(reply.get("max_power"))
    path = f"/settings/relay/{relay}"
    return PlugSettings(
        power_on=GEN1_POWER_ON.get(str(state)) if state is not None else None, auto_off_s=auto_off,
        power_limit_w=limit,
        said={POWER_ON: f"default_state {state}", AUTO_OFF: f"auto_off {auto_off:g} s" if auto_off is not None else "",
              POWER_LIMIT: f"max_power {limit:g} W" if limit is not None else ""},
        fixes={POWER_ON: f"GET {path}?default_state=on", AUTO_OFF: f"GET {path}?auto_off=0",
               POWER_LIMIT: f"GET {path}?max_power=<W above the host's draw>"})


def gen2_settings(config: Any, switch_id: str) -> PlugSettings:
    """``Switch.GetConfig``'s result -> PlugSettings (a missing field: not reported)."""
    if not isinstance(config, dict):
        raise PowerError(f"Switch.GetConfig: result is not an object: {config!r}")
    state = config.get("initial_state")
    armed, delay, limit = config.get("auto_off"), _number(config.get("auto_off_delay")), _number(config.get("power_limit"))
    auto_off = None if not isinstance(armed, bool) else (delay if armed and delay is not None else 0.0)
    if armed is True and delay is None:
        auto_off = None  # armed, for a time it does not say
    set_config = f'Switch.SetConfig {{"id": {switch_id}, "config": {{%s}}}}'
    return PlugSettings(
        power_on=GEN2_POWER_ON.get(str(state)) if state is not None else None, auto_off_s=auto_off,
        power_limit_w=limit,
        said={POWER_ON: f"initial_state {state}",
              AUTO_OFF: f"auto_off {str(armed).lower()}, auto_off_delay {delay:g} s" if delay is not None else "",
              POWER_LIMIT: f"power_limit {limit:g} W" if limit is not None else ""},
        fixes={POWER_ON: set_config % '"initial_state": "on"', AUTO_OFF: set_config % '"auto_off": false',
               POWER_LIMIT: set_config % '"power_limit": <W above the host\'s draw>'})
