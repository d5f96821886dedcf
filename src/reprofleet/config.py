"""Every controller timing in one frozen object, so a test can shrink them all at once.

The waits of a campaign (how long past its timeout an attempt is given, how long a host
may take to reset itself, how a boot is polled, how often a PDU request is retried) used
to be module constants and defaults scattered over runner/, liveness/, power/ and remote/.
Here they are named once, with today's values; the settings objects of those packages
take their defaults from :data:`DEFAULT_TIMINGS`, so nothing a user sees changes.
:meth:`Timings.scaled` multiplies every duration (never a count) by one factor: a test
that runs recovery against a scripted host keeps every ratio between the waits.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Iterator

__all__ = ["DEFAULT_TIMINGS", "Timings"]


@dataclass(frozen=True)
class Timings:
    """The controller's waits, in seconds (``*_s``), and the counts that bound its retries."""

    # -- one attempt (runner/attempt.py)
    controller_grace_s: float = 30.0  # past the agent's own timeout, before the controller steps in
    detached_poll_s: float = 0.2  # no stream (re-attach under way): look again this often
    stream_read_s: float = 0.25  # one wait for the next stream line
    reattach_backoff_s: float = 0.5  # a failed re-attach: wait this long before the next, doubling
    reattach_backoff_cap_s: float = 8.0  # ... up to this (no reconnect storm against a sick sshd)
    # -- recovery (runner/recovery.py)
    reboot_grace_s: float = 30.0  # a silent host may reset itself (watchdog, panic) before we cycle it
    self_reboot_poll_s: float = 0.5  # during that grace: probe this often
    self_reboot_probe_s: float = 1.0  # each of those probes' own timeout
    dwell_s: float = 10.0  # off this long in a power cycle
    retry_dwell_factor: float = 3.0  # a host that did not return: cycled once more with a dwell this much longer
    retry_dwell_extra_s: float = 10.0  # ... and at least this much longer
    stability_s: float = 5.0  # a booted host must stay on its boot this long
    boot_poll_first_s: float = 1.0  # a boot is polled first after this, then backs off
    boot_poll_factor: float = 1.5
    boot_poll_cap_s: float = 10.0  # ... to at most this
    banner_timeout_s: float = 2.0  # one SSH-banner probe while waiting for a boot
    human_wait_s: float = 24 * 3600.0  # a host without a power port: poll this long for a person
    guard_poll_s: float = 2.0  # while our own network is down: ask the guard again this often
    switched_on_poll_s: float = 1.0  # an outlet switched on at campaign start: probe the boot this often
    # -- liveness (liveness/watchdog.py)
    silence_s: float = 3.0  # a wedge needs at least this much stream silence
    probe_after_s: float = 1.0  # stream silence before probing starts
    probe_interval_s: float = 0.5  # a new probe round this often
    probe_timeout_s: float = 1.0  # a round with no answer by then is DEAD
    userspace_s: float = 60.0  # KERNEL without SSHD this long is a userspace wedge
    fleet_window_s: float = 5.0  # hosts silent within this window of each other: a correlated silence
    correlated_hold_s: float = 300.0  # a correlated silence is held this long at most (a switch reboot takes minutes)
    guard_period_s: float = 3.0  # the partition guard's answer is reused this long after its check finished
    guard_budget_s: float = 1.0  # one guard check asks every witness at once, for at most this long
    pause_cap_s: float = 600.0  # our network down this long: the attempt ends as infra
    confirm_s: float = 3.0  # between attempts: probes all failing this long = unreachable
    # -- power devices (power/base.py; each overridable per pdu: block)
    power_timeout_s: float = 5.0  # one request
    power_settle_s: float = 10.0  # read-back deadline after a set
    power_tries: int = 3  # attempts per request when failures are transient
    power_poll_s: float = 0.25  # read-back poll interval
    power_backoff_s: float = 0.5  # first retry delay; doubles
    power_backoff_cap_s: float = 5.0
    power_lock_wait_s: float = 120.0  # waiting for another command to the same device
    # at most power_stagger_on outlets of one power device switched on within power_stagger_window_s
    # (inrush: a PDU's breaker sees every supply that starts at once; see power/stagger.py for the sources)
    power_stagger_on: int = 1
    power_stagger_window_s: float = 2.0
    power_stagger_wait_cap_s: float = 900.0  # no slot by then: the "on" fails (a clock gone wrong, not a queue)
    power_on_deadline_s: float = 120.0  # an "on" that fails is retried with backoff this long (ports.switch_on_until)
    # -- connections (remote/transport.py)
    connect_timeout_s: float = 10.0
    ssh_banner_timeout_s: float = 10.0
    auth_timeout_s: float = 10.0
    command_timeout_s: float = 60.0
    liveness_interval_s: float = 1.0  # keepalive on an open session
    dead_after_s: float = 15.0  # a session whose server said nothing this long is closed

    def retry_dwell(self, dwell_s: float) -> float:
        """The longer dwell of the second cycle of a host that did not come back."""
        return max(self.retry_dwell_factor * dwell_s, dwell_s + self.retry_dwell_extra_s)

    def boot_polls(self) -> "BootPolls":
        return BootPolls(self.boot_poll_first_s, self.boot_poll_factor, self.boot_poll_cap_s)

    def scaled(self, factor: float) -> "Timings":
        """Every duration times ``factor`` (counts and ratios unchanged): all waits shrink together."""
        if factor <= 0:
            raise ValueError(f"a timing scale must be positive, not {factor!r}")
        durations = {f.name: getattr(self, f.name) * factor for f in fields(self) if f.name.endswith("_s")}
        return replace(self, **durations)


@dataclass(frozen=True)
class BootPolls:
    """The delays between probes of a booting host: ``first``, times ``factor`` each time, capped."""

    first_s: float
    factor: float
    cap_s: float

    def delays(self) -> Iterator[float]:
        delay = self.first_s
        while True:
            yield delay
            delay = min(self.cap_s, delay * self.factor)


DEFAULT_TIMINGS = Timings()
