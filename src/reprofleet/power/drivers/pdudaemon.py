"""PDUs behind an existing pdudaemon (labs that run LAVA usually have one).

Selected by an inventory ``pdu:`` block like::

    pdu:
      driver: pdudaemon
      address: http://lava-dispatcher:16421   # pdudaemon's HTTP listener
      pdu: pdu-rack3          # the PDU's name in pdudaemon.conf ("hostname=")
      outlet: 4               # its port number ("port=")
      # alias: ws04           # instead of pdu + outlet, a pdudaemon alias
      # timeout_s: 60         # pdudaemon answers only after its own retries

Requests are ``GET /power/control/on|off?hostname=<pdu>&port=<n>`` (or ``?alias=``);
pdudaemon answers 200 when its driver reported success and 500 otherwise, and only
after its own retries (by default 5 attempts 5 s apart), so the default timeout is long
and a 500 is not retried here.

pdudaemon cannot report an outlet's state: ``status()`` is UNKNOWN, and on/off/cycle are
logged as "unverified". A campaign using it learns that a cycle worked only when the host
comes back with a new boot_id.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

from reprofleet.credentials import Secret
from reprofleet.errors import PowerError
from reprofleet.model import PowerPort
from reprofleet.power.base import DriverSettings, PowerDriver, PowerState
from reprofleet.power.drivers.http import HttpDevice, base_url
from reprofleet.power.log import PowerLog
from reprofleet.power.options import PowerConfigError


def control_query(pdu: str | None, outlet: str | None, alias: str | None) -> str:
    params = {"alias": alias} if alias else {"hostname": pdu or "", "port": outlet or ""}
    return urlencode(params, quote_via=quote)


class PdudaemonDriver(PowerDriver):
    name = "pdudaemon"
    option_names = ("pdu", "alias")
    defaults = DriverSettings(timeout_s=60.0, tries=2)
    reads_state = False

    def __init__(self, port: PowerPort, host: str, log: PowerLog, *, secret: Secret | None = None) -> None:
        super().__init__(port, host, log, secret=secret)
        self.alias = self.options.text("alias")
        self.pdu = self.options.text("pdu")
        if not self.alias and not (self.pdu and port.outlet):
            raise PowerConfigError(f"{self.where}: pdudaemon needs pdu (its name in pdudaemon.conf) and outlet, "
                                   "or alias")
        self.device = HttpDevice(base_url(port.address), self.settings.timeout_s)

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
