"""What a Kasa or Tapo plug reports of its own behaviour (issue 35 item 3), read by the kasa driver.

The fields, as real devices answer them (python-kasa's fixtures of real devices, e.g. a P110:
https://github.com/python-kasa/python-kasa/blob/master/tests/fixtures/smart/P110(EU)_1.0_1.2.3.json,
and its modules ``smart/modules/autooff.py``, ``powerprotection.py``, ``childprotection.py``,
``iot/modules/countdown.py``):

- Tapo (SMART): ``get_device_info`` -> ``default_states`` (``{"type": "last_states"}``, or
  ``{"type": "custom", "state": {"on": bool}}``) is the power-on state after mains loss, and
  ``child_protection`` (where the model has it) the button lock; ``get_auto_off_config`` ->
  ``{"enable", "delay_min"}`` the auto-off timer that runs after every "on";
  ``get_protection_power`` -> ``{"enabled", "protection_power"}`` the overload limit in watts. A
  model without one of these answers "unknown method": not reported.
- Kasa (IOT, the legacy protocol and IOT over KLAP): ``count_down.get_rules`` -> ``rule_list`` of
  ``{"enable", "delay", "act"}``; an enabled rule with ``act`` 0 switches the plug off ``delay``
  seconds after it starts. The sysinfo reports no power-on state, no overload limit and no button
  lock, so those stay unknown (the manual check says what to do).

Pure functions of the answers: the driver asks, these read.
"""

from __future__ import annotations

from typing import Any, Mapping

from reprofleet.power.plug_behaviour import AUTO_OFF, CHILD_LOCK, POWER_LIMIT, POWER_ON, PlugSettings, PowerOnState

APP_FIX = "in the Tapo app: the plug's settings"


def smart_power_on(info: Mapping[str, Any] | None) -> tuple[PowerOnState | None, str]:
    """``default_states`` -> the power-on state and the device's own words ('' when absent)."""
    states = info.get("default_states") if isinstance(info, Mapping) else None
    if not isinstance(states, Mapping):
        return None, ""
    kind = states.get("type")
    if kind == "last_states":
        return PowerOnState.LAST, "default_states type last_states"
    state = states.get("state")
    on = state.get("on") if isinstance(state, Mapping) else None
    if kind == "custom" and isinstance(on, bool):
        return (PowerOnState.ON if on else PowerOnState.OFF), f"default_states type custom, on {str(on).lower()}"
    return None, f"default_states type {kind}"


def smart_auto_off_s(config: Mapping[str, Any] | None) -> float | None:
    """``get_auto_off_config`` -> seconds after an "on" (0: not armed); None: not reported."""
    if not isinstance(config, Mapping) or not isinstance(config.get("enable"), bool):
        return None
    minutes = config.get("delay_min")
    if not config["enable"]:
        return 0.0
    return float(minutes) * 60.0 if isinstance(minutes, (int, float)) and not isinstance(minutes, bool) else None


def smart_power_limit_w(protection: Mapping[str, Any] | None) -> float | None:
    """``get_protection_power`` -> the overload limit in watts (0: none); None: not reported."""
    if not isinstance(protection, Mapping):
        return None
    enabled = next((v for k, v in protection.items() if "enabled" in k and isinstance(v, bool)), None)
    watts = protection.get("protection_power")
    if enabled is None:
        return None
    if not enabled:
        return 0.0
    return float(watts) if isinstance(watts, (int, float)) and not isinstance(watts, bool) else None


def smart_settings(info: Mapping[str, Any] | None, auto_off: Mapping[str, Any] | None,
                   protection: Mapping[str, Any] | None) -> PlugSettings:
    """A Tapo plug's (or a strip socket's) three answers -> PlugSettings; None for an answer not given."""
    power_on, power_on_said = smart_power_on(info)
    seconds, limit = smart_auto_off_s(auto_off), smart_power_limit_w(protection)
    lock = info.get("child_protection") if isinstance(info, Mapping) else None
    said = {POWER_ON: power_on_said,
            AUTO_OFF: "" if seconds is None else
            f"auto_off enable {str(bool(seconds)).lower()}, delay_min {(auto_off or {}).get('delay_min')}",
            POWER_LIMIT: "" if limit is None else f"power protection {limit:g} W" if limit else "power protection off",
            CHILD_LOCK: "" if not isinstance(lock, bool) else f"child_protection {str(lock).lower()}"}
    return PlugSettings(
        power_on=power_on, auto_off_s=seconds, power_limit_w=limit, child_lock=lock if isinstance(lock, bool) else None,
        said={k: v for k, v in said.items() if v},
        fixes={POWER_ON: f"{APP_FIX}, Power-on state: last state or on",
               AUTO_OFF: "kasa --host ADDRESS --username ACCOUNT --password ... feature auto_off_enabled False",
               POWER_LIMIT: f"{APP_FIX}, Power protection: off or above the host's draw",
               CHILD_LOCK: "kasa --host ADDRESS --username ACCOUNT --password ... feature child_lock True"})


def iot_countdown_s(answer: Mapping[str, Any] | None) -> float | None:
    """``count_down.get_rules`` -> seconds until an armed switch-off countdown (0: none); None: not reported."""
    module = answer.get("count_down") if isinstance(answer, Mapping) else None
    rules = module.get("get_rules") if isinstance(module, Mapping) else None
    listed = rules.get("rule_list") if isinstance(rules, Mapping) and not rules.get("err_code") else None
    if not isinstance(listed, list):
        return None
    armed = [float(r.get("remain") or r.get("delay") or 0) for r in listed
             if isinstance(r, Mapping) and r.get("enable") in (1, True) and r.get("act") == 0]
    return min(armed) if armed else 0.0


def iot_settings(countdown: Mapping[str, Any] | None) -> PlugSettings:
    """A Kasa (IOT) plug: only its countdown rules are reported."""
    seconds = iot_countdown_s(countdown)
    return PlugSettings(
        auto_off_s=seconds,
        said={AUTO_OFF: f"count_down rule switching off in {seconds:g} s" if seconds else "no count_down rule armed"}
        if seconds is not None else {},
        fixes={AUTO_OFF: "kasa --host ADDRESS command --module count_down delete_all_rules"})
