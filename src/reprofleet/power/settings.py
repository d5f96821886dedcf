"""How long a driver waits and how often it tries: one frozen object per driver class.

Real devices differ by two orders of magnitude. A smart plug or an SNMP agent answers in
milliseconds; a Redfish BMC takes 10-30 s per call and applies resets late (Ironic raised
its power-state timeout from 30 to 60 s, Metal3 to 120 s: metal3-io/ironic-image#143,
#366), and an unreachable BMC must fail on a connect timeout of its own instead of the
long read timeout (the Ironic fix that added a ~30 s connect timeout beside the 60 s read
timeout). So each driver class carries ``defaults: DriverSettings`` fitting its devices;
``invoke.yaml``'s ``power:`` section overrides them per driver (``power.defaults``), and a
``pdu:`` block's options override both for one outlet.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from reprofleet.config import DEFAULT_TIMINGS
from reprofleet.power.options import COMMON_OPTIONS, Options

__all__ = ["DriverSettings", "SETTING_OPTIONS", "backoff_delays", "settings_from_options"]


@dataclass(frozen=True)
class DriverSettings:
    """Deadlines and retry bounds of one driver (each overridable per ``pdu:`` block)."""

    timeout_s: float = DEFAULT_TIMINGS.power_timeout_s  # one request (a read, for HTTP)
    settle_s: float = DEFAULT_TIMINGS.power_settle_s  # read-back deadline after a set
    tries: int = DEFAULT_TIMINGS.power_tries  # attempts per request when failures are transient
    poll_s: float = DEFAULT_TIMINGS.power_poll_s  # read-back poll interval
    backoff_s: float = DEFAULT_TIMINGS.power_backoff_s  # first retry delay; doubles, capped at backoff_cap_s
    backoff_cap_s: float = DEFAULT_TIMINGS.power_backoff_cap_s
    lock_wait_s: float = DEFAULT_TIMINGS.power_lock_wait_s  # waiting for another command to the same PDU
    connect_timeout_s: float | None = None  # opening a connection; None: timeout_s
    stagger_on: int = DEFAULT_TIMINGS.power_stagger_on  # at most this many outlets of one device switched on ...
    stagger_window_s: float = DEFAULT_TIMINGS.power_stagger_window_s  # ... within this many seconds (0: no limit)

    @property
    def connect_s(self) -> float:
        return self.timeout_s if self.connect_timeout_s is None else self.connect_timeout_s


# The DriverSettings fields a pdu: block (and invoke.yaml's power section) may set.
SETTING_OPTIONS = COMMON_OPTIONS


def settings_from_options(base: DriverSettings, options: Options) -> DriverSettings:
    """``base`` with every setting the options name replaced (each checked, with the block named)."""
    connect = options.number("connect_timeout_s", base.connect_s, minimum=0.05) \
        if options.has("connect_timeout_s") else base.connect_timeout_s
    return replace(
        base,
        timeout_s=options.number("timeout_s", base.timeout_s, minimum=0.05),
        connect_timeout_s=connect,
        settle_s=options.number("settle_s", base.settle_s),
        tries=options.integer("tries", base.tries, minimum=1),
        poll_s=options.number("poll_s", base.poll_s, minimum=0.01),
        backoff_s=options.number("backoff_s", base.backoff_s),
        backoff_cap_s=options.number("backoff_cap_s", base.backoff_cap_s),
        stagger_on=options.integer("stagger_on", base.stagger_on, minimum=1),
        stagger_window_s=options.number("stagger_window_s", base.stagger_window_s),
    )


def backoff_delays(tries: int, base_s: float = 0.5, factor: float = 2.0, cap_s: float = 5.0) -> tuple[float, ...]:
    """The sleeps between ``tries`` attempts: base, base*factor, ... each capped."""
    delays: list[float] = []
    delay = base_s
    for _ in range(max(0, tries - 1)):
        delays.append(min(cap_s, delay))
        delay *= factor
    return tuple(delays)
