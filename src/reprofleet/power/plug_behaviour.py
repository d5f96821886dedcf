"""A plug's own behaviour, and whether it can ruin a night: read from the device, judged here.

A consumer plug switches a host off by itself in ways a campaign never asked for: it comes
back *off* after a mains blip (Tasmota ``PowerOnState 0``, Shelly ``default_state: off`` /
``initial_state: off``), it has an auto-off timer armed (Shelly ``auto_off``, Tasmota
``PulseTime``), or an overload limit below what the host draws (Shelly ``max_power`` /
``power_limit``, Tasmota ``MaxPower``); a button anyone can press is the last. A driver
reports what its device says (:class:`PlugSettings`, through ``PowerDriver._read_plug_settings``,
the one method a new driver implements), and :func:`judge` says per setting ``ok``, ``risk``
(with the fix) or ``unknown`` (with the check to do by hand). Three risks refuse the host
before its first attempt: a power-on state that stays off after mains loss, an armed
auto-off shorter than the campaign, and a power limit below the GPU's power limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, unique
from typing import Any, Mapping

POWER_ON, AUTO_OFF, POWER_LIMIT, CHILD_LOCK = "power-on state", "auto-off", "power limit", "child lock"
SETTINGS = (POWER_ON, AUTO_OFF, POWER_LIMIT, CHILD_LOCK)
MANUAL_CHECKS = {
    POWER_ON: "switch the outlet on, pull the plug from the wall for 10 s and put it back: the host must get "
              "power again (set the plug's power-on / restore state to 'on' or 'last state')",
    AUTO_OFF: "look in the plug's app or web page for an auto-off, countdown or schedule on this outlet, and "
              "turn it off",
    POWER_LIMIT: "check the plug's rating and any overload limit in its app are above the whole host's draw "
                 "(the GPU's power limit plus the rest of the machine)",
    CHILD_LOCK: "a press on the plug's button switches the host off: lock it in the app, or cover it",
}


@unique
class PowerOnState(str, Enum):
    """What an outlet does when mains power comes back."""

    ON = "on"
    OFF = "off"
    LAST = "last"  # the state it had before the loss (on, for an outlet feeding a running host)
    TOGGLE = "toggle"  # the opposite of its saved state: off, for an outlet that was on
    ON_LOCKED = "on_locked"  # on, and no further switching obeyed (Tasmota PowerOnState 4)
    FOLLOWS_INPUT = "follows_input"  # whatever a wired switch input says


@unique
class Verdict(str, Enum):
    OK = "ok"
    RISK = "risk"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class PlugSettings:
    """What a device reports of its own behaviour; None: it does not report that setting.

    ``said`` holds the device's own words per setting (``PowerOnState 0``) and ``fixes`` the
    device's own command that fixes it, both keyed by the names in ``SETTINGS``.
    """

    power_on: PowerOnState | None = None
    auto_off_s: float | None = None  # switches itself off this long after an "on"; 0: not armed
    power_limit_w: float | None = None  # switches itself off above this draw; 0: no limit
    child_lock: bool | None = None  # True: its button does not switch the outlet
    said: Mapping[str, str] = field(default_factory=dict)
    fixes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SettingVerdict:
    name: str
    verdict: Verdict
    found: str
    advice: str = ""  # the fix (risk) or the check by hand (unknown)
    refuses: bool = False  # the campaign refuses the host before its first attempt

    def to_json(self) -> dict[str, Any]:
        return {"setting": self.name, "verdict": self.verdict.value, "found": self.found, "advice": self.advice,
                "refuses": self.refuses}


@dataclass(frozen=True)
class PlugReport:
    """One power device's behaviour, setting by setting."""

    device: str  # the driver's ``where``: host, driver, address, outlet
    settings: tuple[SettingVerdict, ...]

    @property
    def refusal(self) -> str | None:
        """One line naming the first setting that refuses the host, and its fix; None: none does."""
        for setting in self.settings:
            if setting.refuses:
                return f"{self.device}: {setting.name}: {setting.found}; fix: {setting.advice}"
        return None

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "settings": [s.to_json() for s in self.settings]}


def judge(device: str, read: PlugSettings | None, *, campaign_s: float | None, gpu_limit_w: float | None) -> PlugReport:
    """Each setting's verdict; ``campaign_s``: the campaign's expected length on this host,
    ``gpu_limit_w``: the highest power limit its GPU will run at (None: not known)."""
    settings = read or PlugSettings()
    return PlugReport(device, (_power_on(settings), _auto_off(settings, campaign_s),
                               _power_limit(settings, gpu_limit_w), _child_lock(settings)))


def _said(settings: PlugSettings, name: str, fallback: str) -> str:
    return settings.said.get(name) or fallback


def _unknown(name: str) -> SettingVerdict:
    return SettingVerdict(name, Verdict.UNKNOWN, "the device does not report it", MANUAL_CHECKS[name])


def _fix(settings: PlugSettings, name: str, words: str) -> str:
    command = settings.fixes.get(name)
    return f"{words} ({command})" if command else words


def _power_on(settings: PlugSettings) -> SettingVerdict:
    state = settings.power_on
    if state is None:
        return _unknown(POWER_ON)
    said = _said(settings, POWER_ON, state.value)
    if state in (PowerOnState.ON, PowerOnState.LAST):
        return SettingVerdict(POWER_ON, Verdict.OK, f"{said}: the outlet comes back on after mains loss")
    if state is PowerOnState.FOLLOWS_INPUT:
        return SettingVerdict(POWER_ON, Verdict.UNKNOWN, f"{said}: it follows the switch input", MANUAL_CHECKS[POWER_ON])
    why = {PowerOnState.OFF: "stays off after mains loss: a blip leaves the host dark all night",
           PowerOnState.TOGGLE: "toggles after mains loss: an outlet that was on comes back off",
           PowerOnState.ON_LOCKED: "comes back on but then ignores every switch: no power cycle could work"}[state]
    return SettingVerdict(POWER_ON, Verdict.RISK, f"{said}: {why}",
                          _fix(settings, POWER_ON, "set the power-on state to on"), refuses=True)


def _auto_off(settings: PlugSettings, campaign_s: float | None) -> SettingVerdict:
    seconds = settings.auto_off_s
    if seconds is None:
        return _unknown(AUTO_OFF)
    said = _said(settings, AUTO_OFF, f"{seconds:g} s")
    if seconds <= 0:
        return SettingVerdict(AUTO_OFF, Verdict.OK, f"{said}: not armed")
    fix = _fix(settings, AUTO_OFF, "turn the auto-off timer off")
    if campaign_s is None or seconds < campaign_s:
        length = f"the campaign's ~{campaign_s / 3600:.1f} h" if campaign_s is not None else "a campaign"
        return SettingVerdict(AUTO_OFF, Verdict.RISK, f"{said}: the outlet switches itself off {seconds:g} s after "
                                                      f"each on, within {length}", fix, refuses=True)
    return SettingVerdict(AUTO_OFF, Verdict.RISK, f"{said}: armed, longer than the campaign's ~{campaign_s / 3600:.1f} h",
                          fix)


def _power_limit(settings: PlugSettings, gpu_limit_w: float | None) -> SettingVerdict:
    watts = settings.power_limit_w
    if watts is None:
        return _unknown(POWER_LIMIT)
    said = _said(settings, POWER_LIMIT, f"{watts:g} W")
    if watts <= 0:
        return SettingVerdict(POWER_LIMIT, Verdict.OK, f"{said}: no limit set")
    fix = _fix(settings, POWER_LIMIT, "raise the limit above the whole host's draw (or set none)")
    if gpu_limit_w is None:
        return SettingVerdict(POWER_LIMIT, Verdict.UNKNOWN, f"{said}: the GPU's power limit is not known yet",
                              MANUAL_CHECKS[POWER_LIMIT])
    if watts < gpu_limit_w:
        return SettingVerdict(POWER_LIMIT, Verdict.RISK, f"{said}: below the GPU's power limit of {gpu_limit_w:g} W: "
                                                         "the plug trips under load", fix, refuses=True)
    return SettingVerdict(POWER_LIMIT, Verdict.OK, f"{said}: above the GPU's {gpu_limit_w:g} W (the whole host "
                                                   "draws more: leave margin)")


def _child_lock(settings: PlugSettings) -> SettingVerdict:
    locked = settings.child_lock
    if locked is None:
        return _unknown(CHILD_LOCK)
    said = _said(settings, CHILD_LOCK, "locked" if locked else "unlocked")
    if locked:
        return SettingVerdict(CHILD_LOCK, Verdict.OK, f"{said}: the button does not switch the outlet")
    return SettingVerdict(CHILD_LOCK, Verdict.RISK, f"{said}: a press on the plug's button switches the host off",
                          _fix(settings, CHILD_LOCK, "lock the button"))
