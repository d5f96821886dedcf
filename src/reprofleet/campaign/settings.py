"""The controller's settings as Invoke's config holds them (``reprofleet:`` in invoke.yaml, over
the CLI's defaults, under ``INVOKE_REPROFLEET_*``), turned into what each operation needs.

The command line hands the section over as plain values in a :class:`ControllerConfig`; each
part is built here when the operation reaches the step that uses it, as before the CLI was
thinned: a ``--dry-run`` never parses ``notify:``, and a wrong ``power:`` key is reported after
the playbook and the inventory were read, not before.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from reprofleet.campaign.notify import Notifier
from reprofleet.campaign.notify_senders import build_send, parse_settings
from reprofleet.campaign.observe import Observer
from reprofleet.campaign.run import default_controller_name
from reprofleet.credentials import operator_env_secrets
from reprofleet.errors import UsageError
from reprofleet.model import EnvSecret
from reprofleet.liveness.watchdog import WatchdogSettings
from reprofleet.power.defaults import configure
from reprofleet.power.registry import DRIVERS
from reprofleet.records.disk_caps import MIB, DiskCaps
from reprofleet.remote.transport import TransportSettings
from reprofleet.runner.host import RunSettings


@dataclass(frozen=True)
class ControllerConfig:
    """The ``reprofleet:`` section as plain values (no Invoke proxies), every default filled in."""

    values: Mapping[str, Any]

    @property
    def dwell_s(self) -> float:
        return float(self.values["dwell_s"])

    @property
    def power_cycle_budget(self) -> int:
        return int(self.values["power_cycle_budget"])

    def run_settings(self, accept_new: bool | None = None, overrides: Mapping[str, Any] | None = None) -> RunSettings:
        """How every host is reached and watched; ``accept_new`` (a flag) over the config's
        ``accept_new_host_keys``, ``overrides`` (the demo's timings, --break-lease) over both."""
        conf = {**self.values, **(overrides or {})}
        transport = TransportSettings(
            known_hosts=Path(str(conf["known_hosts"])).expanduser(),
            accept_new_host_keys=bool(conf["accept_new_host_keys"] if accept_new is None else accept_new),
        )
        return RunSettings(
            transport=transport,
            watchdog=WatchdogSettings(
                silence_s=float(conf["silence_s"]), probe_after_s=float(conf["probe_after_s"]),
                probe_interval_s=float(conf["probe_interval_s"]), probe_timeout_s=float(conf["probe_timeout_s"]),
                dead_rounds=int(conf["dead_rounds"]), userspace_s=float(conf["userspace_s"]),
                pause_cap_s=float(conf["pause_cap_s"]), fleet_window_s=float(conf["fleet_window_s"]),
                correlated_hold_s=float(conf["correlated_hold_s"])),
            controller=conf["controller"] or default_controller_name(),
            sample_hz=float(conf["sample_hz"]),
            clock_threshold_mhz=float(conf["clock_threshold_mhz"]),
            power_cycle_budget=int(conf["power_cycle_budget"]),
            infra_streak=int(conf["infra_streak"]),
            dwell_s=float(conf["dwell_s"]),
            stability_s=float(conf["stability_s"]),
            reboot_grace_s=float(conf["reboot_grace_s"]),
            break_leases=bool(conf.get("break_leases", False)),
            bring_up=bool(conf.get("bring_up", False)),
            disk=disk_caps(conf),
        )

    def configure_power(self) -> None:
        """The ``power:`` section over the drivers' own defaults, before any driver is built."""
        configure(self.values.get("power"), DRIVERS)

    def env_secrets(self, asked: Iterable[EnvSecret]) -> tuple[EnvSecret, ...]:
        """The secrets a playbook asked for, from the sources the ``env_secrets:`` section gives
        (``NAME: env:VAR`` or ``file:/path``); the rest from ``REPROFLEET_SECRET_<NAME>``."""
        given = self.values.get("env_secrets") or {}
        if not isinstance(given, Mapping):
            raise UsageError("invoke.yaml reprofleet.env_secrets must be a mapping of NAME: env:VAR or file:/path")
        return operator_env_secrets(asked, given, "invoke.yaml reprofleet")

    def notify_observers(self) -> tuple[Observer, ...]:
        """The ``notify:`` section as the campaign's notifier (none when it names no receiver);
        a wrong key or a missing secret stops here, before any host is asked."""
        notify = parse_settings(self.values.get("notify"))
        return (Notifier(build_send(notify), kinds=notify.kinds),) if notify.enabled else ()


def disk_caps(conf: Mapping[str, Any]) -> DiskCaps:
    """``stream_cap_mb``, ``netconsole_cap_mb``, ``netconsole_cap_lines`` and ``campaign_cap_mb``
    as caps; one that cannot work is a UsageError naming it."""
    def number(key: str) -> float:
        try:
            return float(conf[key])
        except (TypeError, ValueError):
            raise UsageError(f"reprofleet.{key}: {conf[key]!r} is not a number") from None

    try:
        return DiskCaps(stream_bytes=int(number("stream_cap_mb") * MIB),
                        netconsole_bytes=int(number("netconsole_cap_mb") * MIB),
                        netconsole_lines=int(number("netconsole_cap_lines")),
                        campaign_bytes=int(number("campaign_cap_mb") * MIB)).check()
    except ValueError as exc:
        raise UsageError(f"reprofleet.{exc}") from None


def seconds(flag: str, value: str) -> float:
    """A duration a person typed (``--dwell``, ``--bug-report-timeout``): finite and >= 0."""
    try:
        number = float(str(value).strip())
    except ValueError:
        raise UsageError(f"--{flag} takes seconds (a number), not {value!r}") from None
    if not (number >= 0 and number < float("inf")):
        raise UsageError(f"--{flag} takes a finite number of seconds >= 0, not {value!r}")
    return number
