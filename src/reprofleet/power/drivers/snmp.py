"""Switched rack PDUs over SNMP (APC rPDU/sPDU, Raritan PX2/PX3, or any OIDs you give).

Selected by an inventory ``pdu:`` block like::

    pdu:
      driver: snmp
      address: 10.0.0.50            # or 10.0.0.50:1161
      outlet: 7
      model: apc_rpdu               # apc_rpdu | apc_rpdu2 | apc_spdu | raritan_px | generic
      credentials: env:PDU_COMMUNITY   # SNMP v2c write community
      # pdu_id: 1                   # which PDU of a daisy chain: the APC rPDU2 "Rack PDU numeric ID"
      #                             # (Network Port Sharing) or Raritan's link id; 1 = the first
      # device_cycle: true          # apc_*: cycles by the PDU's immediateReboot (default)
      # version: 2c                 # 1 | 2c | 3
      # v3: credentials "user:authkey[:privkey]", auth_protocol sha|sha256|md5|none,
      #     priv_protocol aes|aes256|des|none
      # generic: control_oid: 1.3.6...{outlet}  status_oid: ...{outlet}
      #          on_value: 1  off_value: 2  [state_on_value: 1  state_off_value: 2]

pysnmp's asyncio API is run synchronously, one request per call, with the request timeout
enforced twice (pysnmp's own, and an outer ``asyncio.wait_for``). Each driver keeps one
SNMP engine for its lifetime (an engine is costly to build: rebuilding it for every
read-back poll was most of a poll's time), on the process's one SNMP loop (``snmp_loop``:
closing an engine needs its loop to turn, which a loop per driver could not promise); an
engine whose request timed out is dropped, so a late reply never meets the next request.
An SNMP agent does not answer a wrong community at all, so a wrong community reads as
"no answer"; the error says so.

Daisy-chained PDUs: ``pdu_id`` is part of the outlet's identity (``outlet_key``), its name in
errors and in the power log. ``apc_rpdu`` with ``pdu_id`` above 1 switches through the rPDU2
tables (``apc_rpdu2``), whose flat row index is found by walking the table's Module and
Number columns once per PDU (``snmp_chain``); ``apc_spdu`` has no way to name another PDU
and refuses ``pdu_id`` above 1 when the inventory is loaded; Raritan rows carry the pduId.

Cycles (``device_cycle``, default true for the APC models): ``immediateReboot`` (3), which
the PDU carries out by itself, off, its reboot duration, on. The outlet's reboot duration
is read first and set to the dwell when it differs (5-60 s; sPDU 5/10/15/20/30/45/60, the
next one up), then read back: the dwell is what the PDU says. A dwell past 60 s is cycled
off, dwell, on. Raritan's own cycle is not used (its power-off period is a unit-wide or
per-outlet setting not modelled here); nor is the generic model's.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pysnmp.hlapi.v3arch.asyncio import (
    CommunityData, ContextData, ObjectIdentity, ObjectType, SnmpEngine, UdpTransportTarget, UsmUserData,
    get_cmd, next_cmd, set_cmd, usmAesCfb128Protocol, usmAesCfb256Protocol, usmDESPrivProtocol, usmHMACMD5AuthProtocol,
    usmHMACSHAAuthProtocol, usmHMAC192SHA256AuthProtocol, usmNoAuthProtocol, usmNoPrivProtocol,
)
from pysnmp.proto import errind
from pysnmp.proto.rfc1902 import Integer32
from pysnmp.proto.rfc1905 import EndOfMibView, NoSuchInstance, NoSuchObject

from reprofleet.credentials import Secret
from reprofleet.errors import PowerError
from reprofleet.model import PowerPort
from reprofleet.power.base import DeviceCycle, DriverSettings, PowerDriver, PowerState, TransientPowerError
from reprofleet.power.drivers import snmp_chain, snmp_loop
from reprofleet.power.drivers.snmp_oids import (GENERIC_MODEL, MODEL_NAMES, OUTLET_MODELS, OutletOids, is_oid,
                                                 is_oid_template)
from reprofleet.power.log import PowerLog
from reprofleet.power.options import PowerConfigError

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
    for name, oid in (("control_oid", control), ("status_oid", status)):
        if not is_oid_template(oid) or not is_oid(oid.format(outlet="1", pdu="1")):
            raise PowerConfigError(f"{where}: pdu option {name}: {oid[:120]!r} is not a numeric OID template "
                                   "(numbers, '.', {outlet} and {pdu} only)")
    on, off = options.integer("on_value", 1), options.integer("off_value", 2)
    return OutletOids(model=GENERIC_MODEL, control_oid=control, status_oid=status, set_on=on, set_off=off,
                      state_on=options.integer("state_on_value", on), state_off=options.integer("state_off_value", off))


def row_for_pdu(oids: OutletOids, pdu_id: int, where: str) -> OutletOids:
    """The OID row that addresses PDU ``pdu_id`` of a chain; a model that cannot is refused."""
    if pdu_id == 1 or oids.addresses_pdu:
        return oids
    if oids.chain_model:
        return OUTLET_MODELS[oids.chain_model]
    raise PowerConfigError(
        f"{where}: pdu option pdu_id {pdu_id}: model {oids.model} addresses one PDU "
        f"({oids.mib or 'its OIDs'} carry no PDU index); a daisy-chained APC rPDU2 is model apc_rpdu, "
        "a generic model needs {pdu} in its OIDs", field="pdu_id")



def indication_error(what: str, indication: Any, timeout_s: float) -> PowerError:
    """pysnmp's error indication as our error, by its type: no response before the timeout is
    transient (retried; no answer at all), any other indication a definite failure."""
    if isinstance(indication, errind.RequestTimedOut):
        return TransientPowerError(f"{what}: no SNMP answer within {timeout_s:g}s "
                                   "(PDU down, or a wrong community, which agents ignore)")
    return PowerError(f"{what}: {indication}")

class SnmpDriver(PowerDriver):
    name = "snmp"
    default_scheme = "udp"
    default_port = 161
    option_names = ("model", "pdu_id", "version", "auth_protocol", "priv_protocol", "control_oid", "status_oid",
                    "on_value", "off_value", "state_on_value", "state_off_value", "device_cycle")
    defaults = DriverSettings(timeout_s=2.0, tries=4, settle_s=10.0, poll_s=0.25)  # UDP: short tries, more of them

    def __init__(self, port: PowerPort, host: str, log: PowerLog, *, secret: Secret | None = None) -> None:
        super().__init__(port, host, log, secret=secret)
        model = self.options.choice("model", MODEL_NAMES, None)
        if model is None:
            raise PowerConfigError(f"{self.where}: pdu option model is required: one of {', '.join(MODEL_NAMES)}")
        self.outlet = str(port.outlet or "")
        if not self.outlet.isdigit():
            raise PowerConfigError(f"{self.where}: an SNMP outlet is a number, got {port.outlet!r}")
        pdu_id = self.options.integer("pdu_id", 1, minimum=0)
        self.pdu_id = str(pdu_id)
        if pdu_id != 1:
            self.pdu_label = self.pdu_id
            self.where = self._describe()
        base = generic_model(self.options, self.where) if model == GENERIC_MODEL else OUTLET_MODELS[model]
        self.oids = row_for_pdu(base, pdu_id, self.where)
        self.meters_power = self.oids.power_oid is not None
        self.device_cycles = self._device_cycle_option(
            self.oids.set_cycle is not None and self.oids.reboot is not None,
            f"model {self.oids.model}'s own cycle is not used (no reboot duration to read)")
        self.target = split_host_port(port.address, 161)
        if secret is None:
            raise PowerConfigError(f"{self.where}: snmp needs credentials (the write community, or a v3 user)")
        self._auth = self._auth_data(secret)
        self._engine: SnmpEngine | None = None
        self.engines_built = 0  # how many SNMP engines this driver made (one, unless requests timed out)

    def _outlet_id(self) -> str:
        return f"{self.pdu_id}.{self.outlet}"

    # -- which row: a chain's flat index, found once --------------------------------------

    def _rows(self, *names: str) -> dict[str, int]:
        """The row index of this outlet in each named rPDU2 table (none for other models)."""
        return {name: self._row(name) for name in names if name in self.oids.tables}

    def _row(self, name: str) -> int:
        table = self.oids.tables[name]
        rows = snmp_chain.known(self.device_key, table.entry)
        if rows is None:
            modules = self._walk(table.column(table.module_column))
            numbers = self._walk(table.column(table.number_column))
            rows = snmp_chain.rows_from_columns(modules, numbers)
            snmp_chain.remember(self.device_key, table.entry, rows)
        index = rows.get((int(self.pdu_id), int(self.outlet)))
        if index is None:
            chained = sorted({module for module, _ in rows})
            raise PowerError(f"the chain has no outlet {self.outlet} on PDU {self.pdu_id} "
                             f"(rPDU2 rows list PDU ids {', '.join(map(str, chained)) or 'none'})")
        return index

    def _oid(self, template: str, *tables: str) -> str:
        return self.oids.fill(template, self.outlet, self.pdu_id, self._rows(*tables))

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

    async def _exchange(self, engine: SnmpEngine, oid: str, value: int | None, following: bool = False) -> Any:
        target = await UdpTransportTarget.create(self.target, timeout=self.settings.timeout_s, retries=0)
        var_bind = ObjectType(ObjectIdentity(oid)) if value is None else ObjectType(ObjectIdentity(oid), Integer32(value))
        command = next_cmd if following else get_cmd if value is None else set_cmd
        return await command(engine, self._auth, target, ContextData(), var_bind, lookupMib=False)

    def _drop_engine(self, *, wait: bool = True) -> None:
        """Close the engine on the shared loop (waited for, unless called where nothing may block)."""
        engine, self._engine = self._engine, None
        if engine is not None:
            snmp_loop.shared().close_engine(engine, wait=wait)

    def close(self) -> None:
        """Release the engine now (also done, without waiting, when the driver is collected)."""
        self._drop_engine()

    def __del__(self) -> None:
        try:
            self._drop_engine(wait=False)  # the collector may run inside any thread's loop: never block it
        except Exception:  # noqa: BLE001 (interpreter shutdown: the loop's exit hook closes what is left)
            pass

    def _exchanged(self, verb: str, oid: str, value: int | None = None, following: bool = False) -> Any:
        """One request, its transport and protocol errors mapped; returns the answer's var-binds."""
        loop = snmp_loop.shared()
        if self._engine is None:
            self._engine = loop.new_engine()
            self.engines_built += 1
        limit_s = self.settings.timeout_s + 2.0
        try:
            error_indication, error_status, _, var_binds = loop.run(
                asyncio.wait_for(self._exchange(self._engine, oid, value, following), limit_s), limit_s + 1.0)
        except (asyncio.TimeoutError, TimeoutError):
            self._drop_engine()
            raise TransientPowerError(f"{verb} {oid}: no answer within {self.settings.timeout_s:g}s") from None
        except OSError as exc:
            self._drop_engine()
            raise TransientPowerError(f"{verb} {oid}: {exc.strerror or type(exc).__name__}") from None
        if error_indication:
            self._drop_engine()
            raise indication_error(f"{verb} {oid}", error_indication, self.settings.timeout_s)
        if error_status:
            raise PowerError(f"{verb} {oid}: the PDU answered {error_status.prettyPrint()}: "
                             f"{ERROR_HINTS.get(str(error_status.prettyPrint()), 'see the PDU MIB')}"
                             .replace("{outlet}", self.outlet).replace("{model}", self.oids.model))
        return var_binds

    def _call(self, oid: str, value: int | None = None) -> int:
        """One GET (value None) or SET; returns the integer the agent answered with."""
        verb = "GET" if value is None else f"SET {value} on"
        answer = self._exchanged(verb, oid, value)[0][1]
        if isinstance(answer, (NoSuchInstance, NoSuchObject, EndOfMibView)):
            if self.oids.tables:
                snmp_chain.forget(self.device_key)  # the chain may have changed: walk again next time
            raise PowerError(f"{verb} {oid}: no such OID on this PDU: outlet {self.outlet} "
                             f"does not exist for model {self.oids.model}")
        try:
            return int(answer)
        except (TypeError, ValueError):
            raise PowerError(f"{verb} {oid}: not an integer: {answer.prettyPrint()}") from None

    def _walk(self, column: str) -> list[tuple[int, int]]:
        """``(index, value)`` of every cell of one table column (GETNEXT until it leaves the column)."""
        prefix = tuple(int(part) for part in column.split("."))
        cells: list[tuple[int, int]] = []
        current = column
        for _ in range(snmp_chain.MAX_ROWS + 1):
            name, answer = self._exchanged("GETNEXT", current, following=True)[0]
            oid = tuple(name)
            if oid[:len(prefix)] != prefix or len(oid) != len(prefix) + 1 or isinstance(answer, EndOfMibView):
                break
            cells.append((oid[-1], int(answer)))
            current = ".".join(map(str, oid))
        return cells

    def _read_power(self) -> float | None:
        if self.oids.power_oid is None:
            return None
        return float(self._call(self._oid(self.oids.power_oid, "metered")))

    def _set(self, state: PowerState) -> None:
        value = self.oids.set_on if state is PowerState.ON else self.oids.set_off
        self._call(self._oid(self.oids.control_oid, "control"), value)

    def _read(self) -> PowerState:
        value = self._call(self._oid(self.oids.status_oid, "status"))
        if value == self.oids.state_on:
            return PowerState.ON
        if value == self.oids.state_off:
            return PowerState.OFF
        return PowerState.UNKNOWN

    def _plan_device_cycle(self, dwell_s: float) -> DeviceCycle | None:
        """Read the outlet's reboot duration, set it to the dwell when it differs, read it back."""
        reboot = self.oids.reboot
        assert reboot is not None  # device_cycles is only on where the row has one
        wanted = reboot.at_least(dwell_s)
        if wanted is None:
            return DeviceCycle(off_s=float(reboot.longest))  # shorter than the dwell: off, dwell, on
        oid = self._oid(reboot.oid, "config")
        was = self._ask("read the reboot duration", lambda: self._call(oid))
        if was != wanted:
            self._ask(f"set the reboot duration to {wanted} s", lambda: self._call(oid, wanted))
        now = self._ask("read back the reboot duration", lambda: self._call(oid))
        changed = f" (was {was} s)" if was != now else ""
        return DeviceCycle(off_s=float(now), note=f"immediateReboot with the PDU's reboot duration {now} s{changed}")

    def _start_device_cycle(self, plan: DeviceCycle) -> None:
        assert self.oids.set_cycle is not None
        self._call(self._oid(self.oids.control_oid, "control"), self.oids.set_cycle)
