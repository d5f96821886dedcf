"""Which driver switches a host: ``PowerPort.driver`` -> a PowerDriver class.

Callers never import a driver module; they ask ``driver_for``. Credentials are resolved
here, when the driver is made, so a missing secret is reported before anything is
switched, naming the reference and never the value.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from ..credentials import SecretResolver, resolve
from ..model import PowerPort
from .base import PowerDriver
from .command import CommandDriver
from .ipmi import IpmiDriver
from .log import PowerLog
from .options import PowerConfigError
from .pdudaemon import PdudaemonDriver
from .redfish import RedfishDriver
from .shelly import ShellyDriver
from .snmp import SnmpDriver
from .tasmota import TasmotaDriver

DRIVERS: Mapping[str, type[PowerDriver]] = MappingProxyType({
    cls.name: cls
    for cls in (TasmotaDriver, ShellyDriver, SnmpDriver, RedfishDriver, IpmiDriver, PdudaemonDriver, CommandDriver)
})


def driver_for(port: PowerPort, host_name: str, log: PowerLog, *,
               secrets: SecretResolver = resolve, lock_dir: Path | None = None) -> PowerDriver:
    """The driver for ``port``; unknown drivers and bad options raise PowerConfigError.

    ``lock_dir`` (``locks.lock_folder(reports)``) makes its locks hold across processes.
    """
    cls = DRIVERS.get(port.driver)
    if cls is None:
        raise PowerConfigError(
            f"{host_name}: unknown pdu driver {port.driver!r}; known drivers: {', '.join(sorted(DRIVERS))}"
        )
    secret = secrets(port.credentials) if port.credentials is not None else None
    driver = cls(port, host_name, log, secret=secret)
    driver.lock_dir = lock_dir
    return driver
