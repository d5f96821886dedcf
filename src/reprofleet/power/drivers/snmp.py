"""Switched rack PDUs over SNMP (APC rPDU/sPDU, Raritan PX2/PX3, or any OIDs you give).

Selected by an inventory ``pdu:`` block like::

    pdu:
      driver: snmp
      address: 10.0.0.50            # or 10.0.0.50:1161
      outlet: 7
      model: apc_rpdu               # apc_rpdu | apc_spdu | raritan_px | generic
      credentials: env:PDU_COMMUNITY   # SNMP v2c write community
      # pdu_id: 1                   # raritan_px: PDU id when daisy-chained
      # version: 2c                 # 1 | 2c | 3
      # v3: credentials "user:authkey[:privkey]", auth_protocol sha|sha256|md5|none,
      #     priv_protocol aes|aes256|des|none
      # generic: control_oid: 1.3.6...{outlet}  status_oid: ...{outlet}
      #          on_value: 1  off_value: 2  [state_on_value: 1  state_off_value: 2]

pysnmp's asyncio API is run synchronously, one request per call, with the request timeout
enforced twice (pysnmp's own, and an outer ``asyncio.wait_for``). Each driver keeps one
SNMP engine on one event loop of its own for its lifetime (an engine is costly to build:
rebuilding it for every read-back poll was most of a poll's time); an engine whose request
timed out is dropped, so a late reply never meets the next request. An SNMP agent does not
answer a wrong community at all, so a wrong community reads as "no answer"; the error
says so.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pysnmp.hlapi.v3arch.asyncio import (
    CommunityData, ContextData, ObjectIdentity, ObjectType, SnmpEngine, UdpTransportTarget, UsmUserData,
    get_cmd, set_cmd, usmAesCfb128Protocol, usmAesCfb256Protocol, usmDESPrivProtocol, usmHMACMD5AuthProtocol,
    usmHMACSHAAuthProtocol, usmHMAC192SHA256AuthProtocol, usmNoAuthProtocol, usmNoPrivProtocol,
)
from pysnmp.proto.rfc1902 import Integer32
from pysnmp.proto.rfc1905 import EndOfMibView, NoSuchInstance, NoSuchObject

from reprofleet.credentials import Secret
from reprofleet.errors import PowerError
from reprofleet.model import PowerPort
from reprofleet.power.base import PowerDriver, PowerState, TransientPowerError
from reprofleet.power.log import PowerLog
from reprofleet.power.options import PowerConfigError
from reprofleet.power.drivers.snmp_oids import GENERIC_MODEL, MODEL_NAMES, OUTLET_MODELS, OutletOids, is_oid

AUTH_PROTOCOLS = {"none": usmNoAuthProtocol, "md5": usmHMACMD5AuthProtocol, "sha": usmHMACSHAAuthProtocol,
                  "sha256": usmHMAC192SHA256AuthProtocol}
ERROR_HINTS = {
    "noCreation": "outlet {outlet} does not exist on this PDU",
    "notWritable": "this OID cannot be set: a wrong model ({model}) or OID, or a read-only community",
    "noAccess": "this OID cannot be set: a read-only community?",
    "wrongValue": "the PDU does not take this value here (on_value/off_value for this model?)",
    "authorizationError": "the community or v3 user may not do this",
}
PRIV_PROTOCOLS = {"none": usmNoPrivProtocol, "des": usmDESPrivProtocol, "aes": usmAesCfb128Protocol,
                  "aes256": usmAesCfb256Protocol}


def _loop_running_here() -> bool:
    """Is an event loop running in this thread (a caller's, or the collector's during __del__)?"""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def split_host_port(address: str, default_port: int) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[v6]:port`` -> (host, port)."""
    address = address.strip()
    if "://" in address:
        address = address.split("://", 1)[1]
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port = rest.lstrip(":")
        return host, int(port) if port.isdigit() else default_port
    host, sep, port = address.rpartition(":")
    if sep and port.isdigit() and ":" not in host:
        return host, int(port)
    return address, default_port


def generic_model(options: Any, where: str) -> OutletOids:
    """The OID row a user describes with control_oid/status_oid/on_value/off_value."""
    control = options.required_text("control_oid", "model generic needs it, with {outlet}")
    status = options.text("status_oid", control)
    for oid in (control, status):
        if not is_oid(oid.format(outlet="1", pdu="1")):
            raise PowerConfigError(f"{where}: {oid!r} is not a numeric OID template")
    on, off = options.integer("on_value", 1), options.integer("off_value", 2)
    return OutletOids(model=GENERIC_MODEL, control_oid=control, status_oid=status, set_on=on, set_off=off,
                      state_on=options.integer("state_on_value", on), state_off=options.integer("state_off_value", off))


class SnmpDriver(PowerDriver):
    name = "snmp"
    default_scheme = "udp"
    default_port = 161
    option_names = ("model", "pdu_id", "version", "auth_protocol", "priv_protocol", "control_oid", "status_oid",
                    "on_value", "off_value", "state_on_value", "state_off_value")

    def __init__(self, port: PowerPort, host: str, log: PowerLog, *, secret: Secret | None = None) -> None:
        super().__init__(port, host, log, secret=secret)
        model = self.options.choice("model", MODEL_NAMES, None)
        if model is None:
            raise PowerConfigError(f"{self.where}: pdu option model is required: one of {', '.join(MODEL_NAMES)}")
        self.oids = generic_model(self.options, self.where) if model == GENERIC_MODEL else OUTLET_MODELS[model]
        self.outlet = str(port.outlet or "")
        if not self.outlet.isdigit():
            raise PowerConfigError(f"{self.where}: an SNMP outlet is a number, got {port.outlet!r}")
        self.pdu_id = str(self.options.integer("pdu_id", 1, minimum=0))
        self.meters_power = self.oids.power_oid is not None
        self.target = split_host_port(port.address, 161)
        if secret is None:
            raise PowerConfigError(f"{self.where}: snmp needs credentials (the write community, or a v3 user)")
        self._auth = self._auth_data(secret)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._engine: SnmpEngine | None = None
        self.engines_built = 0  # how many SNMP engines this driver made (one, unless requests timed out)

    def _outlet_id(self) -> str:
        return f"{self.pdu_id}.{self.outlet}"

    def _auth_data(self, secret: Secret) -> CommunityData | UsmUserData:
        version = self.options.choice("version", ("1", "2c", "3"), "2c")
        if version != "3":
            return CommunityData(secret.reveal(), mpModel=0 if version == "1" else 1)
        user, *keys = secret.reveal().split(":")
        auth_key, priv_key = (keys + [None, None])[:2]
        self._secrets.extend(Secret(key) for key in keys if key)
        auth = self.options.choice("auth_protocol", tuple(AUTH_PROTOCOLS), "sha" if auth_key else "none")
        priv = self.options.choice("priv_protocol", tuple(PRIV_PROTOCOLS), "aes" if priv_key else "none")
        return UsmUserData(user, authKey=auth_key, privKey=priv_key,
                           authProtocol=AUTH_PROTOCOLS[str(auth)], privProtocol=PRIV_PROTOCOLS[str(priv)])

    async def _exchange(self, oid: str, value: int | None) -> Any:
        if self._engine is None:
            self._engine = SnmpEngine()
            self.engines_built += 1
        target = await UdpTransportTarget.create(self.target, timeout=self.settings.timeout_s, retries=0)
        var_bind = ObjectType(ObjectIdentity(oid)) if value is None else ObjectType(ObjectIdentity(oid), Integer32(value))
        command = get_cmd if value is None else set_cmd
        return await command(self._engine, self._auth, target, ContextData(), var_bind)

    def _drop_engine(self) -> None:
        if self._engine is not None:
            self._engine.close_dispatcher()
            self._engine = None
            if self._loop is not None and not self._loop.is_closed() and not self._loop.is_running() \
                    and not _loop_running_here():
                self._loop.run_until_complete(asyncio.sleep(0))  # let the cancelled timer task end

    def close(self) -> None:
        """Release the engine and its event loop (also done when the driver is collected)."""
        self._drop_engine()
        if self._loop is not None and not self._loop.is_closed():
            self._loop.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown: nothing left to release)
            pass

    def _call(self, oid: str, value: int | None = None) -> int:
        """One GET (value None) or SET; returns the integer the agent answered with."""
        verb = "GET" if value is None else f"SET {value} on"
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        try:
            error_indication, error_status, _, var_binds = self._loop.run_until_complete(
                asyncio.wait_for(self._exchange(oid, value), self.settings.timeout_s + 2.0))
        except (asyncio.TimeoutError, TimeoutError):
            self._drop_engine()
            raise TransientPowerError(f"{verb} {oid}: no answer within {self.settings.timeout_s:g}s") from None
        except OSError as exc:
            self._drop_engine()
            raise TransientPowerError(f"{verb} {oid}: {exc.strerror or type(exc).__name__}") from None
        if error_indication:
            self._drop_engine()
            if "timeout" in str(error_indication).lower():
                raise TransientPowerError(f"{verb} {oid}: no SNMP answer within {self.settings.timeout_s:g}s "
                                          "(PDU down, or a wrong community, which agents ignore)")
            raise PowerError(f"{verb} {oid}: {error_indication}")
        if error_status:
            raise PowerError(f"{verb} {oid}: the PDU answered {error_status.prettyPrint()}: "
                             f"{ERROR_HINTS.get(str(error_status.prettyPrint()), 'see the PDU MIB')}"
                             .replace("{outlet}", self.outlet).replace("{model}", self.oids.model))
        answer = var_binds[0][1]
        if isinstance(answer, (NoSuchInstance, NoSuchObject, EndOfMibView)):
            raise PowerError(f"{verb} {oid}: no such OID on this PDU: outlet {self.outlet} "
                             f"does not exist for model {self.oids.model}")
        try:
            return int(answer)
        except (TypeError, ValueError):
            raise PowerError(f"{verb} {oid}: not an integer: {answer.prettyPrint()}") from None

    def _read_power(self) -> float | None:
        oid = self.oids.power(self.outlet, self.pdu_id)
        return float(self._call(oid)) if oid else None

    def _set(self, state: PowerState) -> None:
        value = self.oids.set_on if state is PowerState.ON else self.oids.set_off
        self._call(self.oids.control(self.outlet, self.pdu_id), value)

    def _read(self) -> PowerState:
        value = self._call(self.oids.status(self.outlet, self.pdu_id))
        if value == self.oids.state_on:
            return PowerState.ON
        if value == self.oids.state_off:
            return PowerState.OFF
        return PowerState.UNKNOWN
