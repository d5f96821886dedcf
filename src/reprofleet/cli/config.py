"""Invoke's config for reprofleet: every setting's default, and the ``reprofleet:`` section as
the layers below take it (plain values, no Invoke proxies).

Project defaults live in ``invoke.yaml`` under ``reprofleet:`` (Invoke's own layering:
defaults < project file < env ``INVOKE_REPROFLEET_...`` < flags).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from reprofleet.cli.env_config import normalise_environment
from reprofleet.errors import UsageError
from reprofleet.records.private_files import configure_group_access

if TYPE_CHECKING:
    from reprofleet.campaign.settings import ControllerConfig

DEFAULTS: dict[str, Any] = {
    "reports": "reports",
    "known_hosts": "~/.ssh/known_hosts",
    "accept_new_host_keys": False,
    "sample_hz": 10.0,
    "clock_threshold_mhz": 2800.0,
    "silence_s": 3.0,
    "probe_after_s": 1.0,
    "probe_interval_s": 0.5,
    "probe_timeout_s": 1.0,
    "dead_rounds": 3,
    "userspace_s": 60.0,
    "pause_cap_s": 600.0,
    "fleet_window_s": 5.0,
    "correlated_hold_s": 300.0,
    "power_cycle_budget": 20,
    "infra_streak": 3,
    "dwell_s": 10.0,
    "stability_s": 5.0,
    "reboot_grace_s": 30.0,
    "stream_cap_mb": 32.0,
    "netconsole_cap_mb": 16.0,
    "netconsole_cap_lines": 100000,
    "campaign_cap_mb": 4096.0,
    "controller": None,
    "env_secrets": {},  # NAME: env:VAR or file:/path, for the secrets a playbook asks for (else REPROFLEET_SECRET_NAME)
    "campaign_group": False,  # true: campaign folders 0750 and files 0640 (the group reads); else 0700/0600
    "sim_dir": "/var/lib/reprofleet-sim/cli",  # not under /tmp, /root or /var/tmp: simulated hosts shadow those
}
# before Invoke reads the shell environment (its executor does, after importing these tasks)
normalise_environment(DEFAULTS)

# The demo's hosts boot in seconds: no need to wait as long as for a real workstation.
DEMO_OVERRIDES = {"dwell_s": 2.0, "stability_s": 1.0, "reboot_grace_s": 2.0,
                  "correlated_hold_s": 10.0}  # its scripted hosts may wedge in one round: held 10 s, not 300


def conf(c: Any) -> dict[str, Any]:
    """The ``reprofleet:`` section over :data:`DEFAULTS`."""
    merged = dict(DEFAULTS)
    merged.update(dict(c.config.get("reprofleet", {}) or {}))
    configure_group_access(_flag(merged, "campaign_group"))  # before any command writes a campaign file
    return merged


def _flag(merged: Mapping[str, Any], key: str) -> bool:
    value = merged[key]  # an INVOKE_REPROFLEET_* string was parsed by env_config already
    if not isinstance(value, bool):
        raise UsageError(f"reprofleet.{key} must be true or false, got {value!r}")
    return value


def plain(value: Any) -> Any:
    """Invoke's config proxies -> plain dicts (for code that knows nothing of Invoke)."""
    return {key: plain(value[key]) for key in value} if hasattr(value, "keys") else value


def reports(c: Any) -> Path:
    """Where campaign folders go (``reports``)."""
    return Path(conf(c)["reports"])


def sim_dir(c: Any) -> Path:
    """The simulated fleet's state folder (``sim_dir``)."""
    return Path(conf(c)["sim_dir"])


def controller(c: Any) -> "ControllerConfig":
    """The section as the campaign layer reads it, part by part when each is needed."""
    # lazy: campaign.settings loads the runner, power drivers, paramiko and scipy: 0.88 s that `invoke --list` never pays
    from reprofleet.campaign.settings import ControllerConfig

    return ControllerConfig(plain(conf(c)))
