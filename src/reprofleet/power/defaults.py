"""``invoke.yaml``'s ``power:`` section: each driver's timings where a user can see and change them.

Layers, lowest first: a driver class's ``defaults`` (fitting its devices, with sources in
its module), this section, a ``pdu:`` block's options. The section holds settings for
every driver at its top level and per driver under the driver's name::

    power:
      stagger_on: 1            # every driver
      stagger_window_s: 2
      redfish: {timeout_s: 60, connect_timeout_s: 30, tries: 5, settle_s: 120}

The CLI installs it once per process (``configure``); drivers built afterwards take it. A
misspelt key is refused like a misspelt ``pdu:`` option, naming the section and the keys
that exist: a timeout silently left at its default is how a slow BMC ends up "dead".
"""

from __future__ import annotations

import threading
from typing import Any, Iterable, Mapping

from reprofleet.power.options import Options, PowerConfigError
from reprofleet.power.settings import SETTING_OPTIONS, DriverSettings, settings_from_options

__all__ = ["configure", "configured", "defaults_for"]

_SECTION: dict[str, Mapping[str, Any]] = {}
_GUARD = threading.Lock()
COMMON = "*"  # the top-level keys: every driver


def _check(raw: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    options = Options(raw, where, ())
    settings_from_options(DriverSettings(), options)  # every value checked now, not at the first wedge
    return dict(raw)


def configure(section: Mapping[str, Any] | None, drivers: Iterable[str], where: str = "invoke.yaml: power") -> None:
    """Install ``section`` (None or empty: back to the drivers' own defaults); ``drivers`` are the known names."""
    known = tuple(drivers)
    parsed: dict[str, Mapping[str, Any]] = {}
    common: dict[str, Any] = {}
    for key, value in dict(section or {}).items():
        if isinstance(value, Mapping) or hasattr(value, "keys"):
            if key not in known:
                raise PowerConfigError(f"{where}.{key}: no such driver; known drivers: {', '.join(sorted(known))}")
            parsed[key] = _check(dict(value), f"{where}.{key}")
        elif key in SETTING_OPTIONS:
            common[key] = value
        else:
            raise PowerConfigError(f"{where}: unknown key {key}; a setting ({', '.join(SETTING_OPTIONS)}) "
                                   f"or a driver name ({', '.join(sorted(known))}) with its settings")
    parsed[COMMON] = _check(common, where)
    with _GUARD:
        _SECTION.clear()
        _SECTION.update(parsed)


def configured() -> dict[str, Mapping[str, Any]]:
    """What is installed now (for ``invoke`` to show, and tests)."""
    with _GUARD:
        return dict(_SECTION)


def defaults_for(driver: str, own: DriverSettings) -> DriverSettings:
    """``own`` (the class's defaults) with the section's every-driver and per-driver settings on top."""
    with _GUARD:
        layers = [_SECTION.get(COMMON, {}), _SECTION.get(driver, {})]
    settings = own
    for layer in layers:
        if layer:
            settings = settings_from_options(settings, Options(layer, f"invoke.yaml: power.{driver}", ()))
    return settings
