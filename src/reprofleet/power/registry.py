"""Which driver switches a host: ``PowerPort.driver`` -> a PowerDriver class.

Callers never import a driver module; they ask ``driver_for``. Credentials are resolved
here, when the driver is made, so a missing secret is reported before anything is
switched, naming the reference and never the value.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from reprofleet.clock import Clock
from reprofleet.credentials import SecretResolver, resolve
from reprofleet.model import PowerPort
from reprofleet.power.base import PowerDriver
from reprofleet.power.drivers.command import CommandDriver
from reprofleet.power.drivers.fence import FenceDriver
from reprofleet.power.drivers.homeassistant import HomeAssistantDriver
from reprofleet.power.drivers.ipmi import IpmiDriver
from reprofleet.power.drivers.kasa import KasaDriver
from reprofleet.power.log import PowerLog
from reprofleet.power.options import PowerConfigError
from reprofleet.power.drivers.pdudaemon import PdudaemonDriver
from reprofleet.power.drivers.redfish import RedfishDriver
from reprofleet.power.drivers.shelly import ShellyDriver
from reprofleet.power.drivers.slurm import SlurmRebootDriver
from reprofleet.power.drivers.snmp import SnmpDriver
from reprofleet.power.drivers.tasmota import TasmotaDriver

DRIVERS: Mapping[str, type[PowerDriver]] = MappingProxyType({
    cls.name: cls
    for cls in (TasmotaDriver, ShellyDriver, SnmpDriver, RedfishDriver, IpmiDriver, PdudaemonDriver, CommandDriver,
                FenceDriver, HomeAssistantDriver, KasaDriver, SlurmRebootDriver)
})


def driver_for(port: PowerPort, host_name: str, log: PowerLog, *,
               secrets: SecretResolver = resolve, lock_dir: Path | None = None,
               clock: Clock | None = None, fallback: int | None = None) -> PowerDriver:
    """The driver for ``port``; unknown drivers and bad options raise PowerConfigError.

    ``lock_dir`` (``locks.lock_folder(reports)``) makes its locks hold across processes;
    ``clock`` is what its waits wait on (the system clock unless a test plays it in virtual time);
    ``fallback`` marks the host's n-th ``fallback:`` device (its errors and log lines say so).
    """
    cls = DRIVERS.get(port.driver)
    if cls is None:
        raise PowerConfigError(
            f"{host_name}: unknown pdu driver {port.driver!r}; known drivers: {', '.join(sorted(DRIVERS))}"
        )
    secret = secrets(port.credentials) if port.credentials is not None else None
    driver = cls(port, host_name, log, secret=secret)
    driver.lock_dir = lock_dir
    if fallback:
        driver.fallback = fallback
        driver.where = driver.options.where = driver._describe()
    if clock is not None:
        driver.clock = clock
    return driver
