"""PDUs behind an existing pdudaemon (labs that run LAVA usually have one).

Selected by an inventory ``pdu:`` block like::

    pdu:
      driver: pdudaemon
      address: http://lava-dispatcher:16421   # pdudaemon's HTTP listener
      pdu: pdu-rack3          # the PDU's name in pdudaemon.conf ("hostname=")
      outlet: 4               # its port number ("port=")
      # alias: ws04           # instead of pdu + outlet, a pdudaemon alias
      # device_cycle: true    # cycles by pdudaemon's own reboot (default); false: off, dwell, on
      # timeout_s: 60         # pdudaemon answers only after its own retries

Requests are ``GET /power/control/on|off?hostname=<pdu>&port=<n>`` (or ``?alias=``);
pdudaemon answers 200 when its driver reported success and 500 otherwise, and only
after its own retries (by default 5 attempts 5 s apart), so the default timeout is long
and a 500 is not retried here.

pdudaemon cannot report an outlet's state: ``status()`` is UNKNOWN, and on/off/cycle are
logged as "unverified". A campaign using it learns that a cycle worked only when the host
comes back with a new boot_id.

A cycle (``device_cycle``, default true) is ``GET /power/control/reboot?...&delay=<s>``:
pdudaemon switches off, sleeps ``delay`` whole seconds and switches on itself, and answers
after the "on" (pdudaemon listener.process_request, 1.1.1; its aiohttp handler is not
cancelled when the client goes away, aiohttp's ``handler_cancellation`` defaulting to off),
so the host comes back even if the controller dies in the dwell. That request may take the
dwell plus both jobs' retries, so it waits ``timeout_s`` plus the dwell, and is never
retried: a second reboot could land in the host's boot. When it fails, "on" is sent.
"""

from __future__ import annotations

import math
from urllib.parse import quote, urlencode

from reprofleet.credentials import Secret
from reprofleet.errors import PowerError
from reprofleet.model import PowerPort
from reprofleet.power.base import DeviceCycle, DriverSettings, PowerDriver, PowerState, TransientPowerError
from reprofleet.power.drivers.http import HttpDevice, base_url
from reprofleet.power.drivers.tls_pin import TLS_OPTIONS, tls_trust
from reprofleet.power.log import PowerLog
from reprofleet.power.options import PowerConfigError


def control_query(pdu: str | None, outlet: str | None, alias: str | None, delay_s: int | None = None) -> str:
    params = {"alias": alias} if alias else {"hostname": pdu or "", "port": outlet or ""}
    if delay_s is not None:
        params["delay"] = str(delay_s)
    return urlencode(params, quote_via=quote)


def reboot_delay(dwell_s: float) -> int:
    """pdudaemon sleeps ``int(delay)`` seconds: whole seconds, at least the dwell, at least 1."""
    return max(1, math.ceil(round(dwell_s, 6)))


class PdudaemonDriver(PowerDriver):
    name = "pdudaemon"
    option_names = ("pdu", "alias", "device_cycle", *TLS_OPTIONS)
    defaults = DriverSettings(timeout_s=60.0, tries=2)
    reads_state = False

    def __init__(self, port: PowerPort, host: str, log: PowerLog, *, secret: Secret | None = None) -> None:
        super().__init__(port, host, log, secret=secret)
        self.alias = self.options.text("alias")
        self.pdu = self.options.text("pdu")
        if not self.alias and not (self.pdu and port.outlet):
            raise PowerConfigError(f"{self.where}: pdudaemon needs pdu (its name in pdudaemon.conf) and outlet, "
                                   "or alias")
        self.device = HttpDevice(base_url(port.address), self.settings.timeout_s, tls=tls_trust(self.options),
                                 connect_timeout_s=self.settings.connect_s)
        self.device_cycles = self._device_cycle_option(True)

    @property
    def device_key(self) -> str:
        """pdudaemon queues per PDU itself: what must not overlap is one PDU, not the listener."""
        return f"{super().device_key}/{self.pdu or 'alias:' + str(self.alias)}"

    def _outlet_id(self) -> str:
        return str(self.port.outlet or "") if self.pdu else str(self.alias)

    def _set(self, state: PowerState) -> None:
        path = f"/power/control/{state.value}"
        query = control_query(self.pdu, self.port.outlet, self.alias)
        # pdudaemon has retried already when it answers 500: do not multiply its retries.
        response = self.device.request("GET", path, query=query, retry_server_errors=False)
        if response.status_code != 200:
            raise PowerError(f"GET {path}: HTTP {response.status_code}: pdudaemon says {response.text.strip()[:120]!r}")

    def _read(self) -> PowerState:
        return PowerState.UNKNOWN

    def _plan_device_cycle(self, dwell_s: float) -> DeviceCycle | None:
        delay = reboot_delay(dwell_s)
        return DeviceCycle(off_s=float(delay), visible=False, note=f"pdudaemon reboot with delay={delay}")

    def _start_device_cycle(self, plan: DeviceCycle) -> None:
        path = "/power/control/reboot"
        delay = reboot_delay(plan.off_s or 0.0)
        query = control_query(self.pdu, self.port.outlet, self.alias, delay)
        try:
            response = self.device.request("GET", path, query=query, retry_server_errors=False,
                                           timeout_s=self.settings.timeout_s + delay)
        except TransientPowerError as exc:  # pdudaemon may still be cycling: a retry could land in the boot
            raise PowerError(f"{exc} (the reboot may still be under way: not retried)") from None
        if response.status_code != 200:
            raise PowerError(f"GET {path}: HTTP {response.status_code}: pdudaemon says {response.text.strip()[:120]!r}")
