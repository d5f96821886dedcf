"""The simulated PDU's firmware: ``python -m reprofleet.sim.power.snmp_agent CONFIG``.

An SNMP v1/v2c agent (pysnmp's command responders, the same protocol engine snmpsim
uses) whose MIB is the PDU itself: a GET of an outlet's state reads its switch file, a SET
of its control OID switches it, the metered power reads ``meter.wall_watts``. The OIDs
come from ``pdu_mibs`` (copied from the MIBs), never from the driver's table.

Error replies are what real agents send: SET on a read-only column is ``notWritable``, on
an outlet the PDU does not have ``noCreation``, a value the MIB does not define
``wrongValue``; a GET of a missing outlet is ``noSuchInstance``; a request with a wrong
community gets no answer at all.

An ``immediateReboot`` switches the outlet off and back on by itself after the outlet's
reboot duration (settable through the MIB, 5 s as shipped), whatever the client does; a new
command to the outlet replaces a reboot in progress.

CONFIG (JSON): ``port``, ``community``, ``chain`` (PDU module id -> outlet id -> switch
file; module 1 is the first PDU), ``families``, ``pdu_id`` (Raritan's rows), ``reboot_s``
(Raritan's cycle), ``ready`` (a file written once listening).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from pysnmp.carrier.asyncio.dgram import udp
from pysnmp.entity import config, engine
from pysnmp.entity.rfc3413 import cmdrsp, context
from pysnmp.proto import rfc1902, rfc1905
from pysnmp.smi import error as smi_error
from pysnmp.smi.instrum import AbstractMibInstrumController

from .meter import wall_watts
from .pdu_mibs import FAMILIES, SYSTEM, Column, MibColumn
from .switch import outlets_from_json, read_switch, write_switch

Oid = tuple[int, ...]


Key = tuple[int, int]  # (module, outlet): which PDU of the chain, which outlet on it
DEFAULT_REBOOT_S = 5  # APC's factory reboot duration (rPDUOutletConfigRebootDuration.n = 5 in PDU dumps)


class PduFirmware(AbstractMibInstrumController):
    """Answers GET/GETNEXT/SET for every outlet of every configured PDU family.

    ``chain`` maps each PDU's module id to its outlets (module 1 is the first PDU, the one
    the legacy rPDU/sPDU tables and Raritan's ``pdu_id`` rows describe); rPDU2 tables number
    every outlet of the chain with one flat index, PDU after PDU (the MIB says nothing of the
    order; clients must find rows by their Module and Number columns).
    """

    def __init__(self, chain: Mapping[int, Mapping[int, Path]], families: list[str], pdu_id: int,
                 reboot_s: float) -> None:
        self.switches: dict[Key, Path] = {(m, o): Path(p) for m, outlets in chain.items() for o, p in outlets.items()}
        # the rPDU2 index: the chain's PDUs one after the other, each as many outlets long as its highest
        # outlet number (the first PDU's outlet n is row n, as on a real chain's host PDU)
        self.offsets: dict[int, int] = {}
        start = 0
        for module in sorted(chain):
            self.offsets[module] = start
            start += max((int(o) for o in chain[module]), default=0)
        self.columns = list(dict.fromkeys(column for family in families for column in FAMILIES[family]))
        self.pdu_id = pdu_id
        self.reboot_s = reboot_s  # Raritan's cycle
        self.reboot_times: dict[Key, int] = {key: DEFAULT_REBOOT_S for key in self.switches}
        self.pending: dict[Key, threading.Timer] = {}
        self.lock = threading.Lock()

    # -- the table ------------------------------------------------------------------------

    def _index(self, column: MibColumn, key: Key) -> Oid | None:
        if column.chained:
            return (self.offsets[key[0]] + key[1],)
        if key[0] != 1:
            return None  # the legacy tables describe the first PDU only
        return (self.pdu_id, key[1]) if column.by_pdu else (key[1],)

    def _key(self, column: MibColumn, index: Oid) -> Key | None:
        """The outlet a row index addresses, or None for a row the PDU does not have."""
        if column.chained:
            found = [key for key in self.switches if self.offsets[key[0]] + key[1] == index[0]]
            return found[0] if found else None
        outlet = index[1] if column.by_pdu else index[0]
        if column.by_pdu and index[0] != self.pdu_id:
            return None
        return (1, outlet) if (1, outlet) in self.switches else None

    def _find(self, name: Oid) -> tuple[MibColumn, Key | None] | None:
        """The column and outlet ``name`` addresses (None: no such row), or None for no such column."""
        for column in self.columns:
            size, width = len(column.prefix), 2 if column.by_pdu else 1
            if name[:size] != column.prefix or len(name) != size + width + len(column.suffix):
                continue
            rest = name[size:]
            if column.suffix and rest[-len(column.suffix):] != column.suffix:
                continue
            return column, self._key(column, rest[:width])
        return None

    def _value(self, column: MibColumn, key: Key) -> Any:
        path = self.switches[key]
        if column.column is Column.WATTS:
            watts = int(round(wall_watts(path)))
            return rfc1902.Unsigned32(watts) if column.by_pdu else rfc1902.Integer32(watts)
        if column.column is Column.MODULE:
            return rfc1902.Integer32(key[0])
        if column.column is Column.NUMBER:
            return rfc1902.Integer32(key[1])
        if column.column is Column.REBOOT_TIME:
            return rfc1902.Integer32(self.reboot_times[key])
        return rfc1902.Integer32(column.on if read_switch(path) else column.off)

    def _all(self) -> list[tuple[Oid, Any]]:
        rows: list[tuple[Oid, Any]] = [(name, rfc1902.OctetString(text)) for name, text in SYSTEM.items()]
        for column in self.columns:
            for key in self.switches:
                index = self._index(column, key)
                if index is not None:
                    rows.append((column.prefix + index + column.suffix, (column, key)))
        return sorted(rows, key=lambda row: row[0])

    def _answer(self, name: Oid, value: Any) -> Any:
        if isinstance(value, tuple):
            return self._value(*value)
        return value

    # -- the SNMP operations ----------------------------------------------------------------

    def read_variables(self, *var_binds: Any, **ctx: Any) -> list[tuple[Any, Any]]:
        answers = []
        for name, _ in var_binds:
            key = tuple(name)
            if key in SYSTEM:
                answers.append((name, rfc1902.OctetString(SYSTEM[key])))
                continue
            found = self._find(key)
            if found is None or found[1] is None:
                answers.append((name, rfc1905.noSuchInstance if found else rfc1905.noSuchObject))
                continue
            answers.append((name, self._value(found[0], found[1])))
        return answers

    def read_next_variables(self, *var_binds: Any, **ctx: Any) -> list[tuple[Any, Any]]:
        rows, answers = self._all(), []
        for name, _ in var_binds:
            after = [(oid, value) for oid, value in rows if oid > tuple(name)]
            if not after:
                answers.append((name, rfc1905.endOfMibView))
            else:
                oid, value = after[0]
                answers.append((rfc1902.ObjectName(oid), self._answer(oid, value)))
        return answers

    def write_variables(self, *var_binds: Any, **ctx: Any) -> list[tuple[Any, Any]]:
        for index, (name, value) in enumerate(var_binds):
            found = self._find(tuple(name))
            if found is None or found[0].column not in (Column.CONTROL, Column.REBOOT_TIME):
                raise smi_error.NotWritableError(name=name, idx=index)
            column, key = found
            if key is None:
                raise smi_error.NoCreationError(name=name, idx=index)
            if not isinstance(value, rfc1902.Integer32) or not self._takes(column, int(value)):
                raise smi_error.WrongValueError(name=name, idx=index)
        answers = []
        for name, value in var_binds:
            found = self._find(tuple(name))
            assert found is not None and found[1] is not None  # checked above
            column, key = found[0], found[1]
            if column.column is Column.REBOOT_TIME:
                self.reboot_times[key] = _reboot_time(column, int(value))
                answers.append((name, rfc1902.Integer32(self.reboot_times[key])))
            else:
                self._command(column, key, int(value))
                answers.append((name, value))
        return answers

    @staticmethod
    def _takes(column: MibColumn, value: int) -> bool:
        if column.column is Column.CONTROL:
            return value in column.allowed
        return bool(column.choices) or column.low <= value <= column.high

    def _command(self, column: MibColumn, key: Key, value: int) -> None:
        """Switch now; a reboot switches back on by itself after the outlet's reboot duration."""
        path = self.switches[key]
        with self.lock:
            pending = self.pending.pop(key, None)
            if pending is not None:
                pending.cancel()  # a new command replaces a reboot in progress
            if value == column.reboot:
                write_switch(path, False)
                duration = self.reboot_s if column.by_pdu else float(self.reboot_times[key])
                timer = threading.Timer(duration, self._reboot_done, args=(key,))
                timer.daemon = True
                self.pending[key] = timer
                timer.start()
            elif value in (column.on, column.off):
                write_switch(path, value == column.on)
            # delayed commands and cancelPendingCommand are accepted and do nothing here

    def _reboot_done(self, key: Key) -> None:
        with self.lock:
            self.pending.pop(key, None)
            write_switch(self.switches[key], True)


def _reboot_time(column: MibColumn, value: int) -> int:
    """sPDU: "the next lower acceptable value" (below the lowest, the lowest); rPDU: the value."""
    if not column.choices:
        return value
    lower = [choice for choice in column.choices if choice <= value]
    return max(lower) if lower else min(column.choices)


def serve(cfg: Mapping[str, Any]) -> None:
    snmp_engine = engine.SnmpEngine()
    transport = udp.UdpTransport().open_server_mode(("127.0.0.1", int(cfg["port"])))
    config.add_transport(snmp_engine, udp.DOMAIN_NAME, transport)
    config.add_v1_system(snmp_engine, "pdu-area", str(cfg["community"]))
    for model in (1, 2):  # SNMPv1 and v2c: read and write the whole enterprise and mib-2 trees
        config.add_vacm_user(snmp_engine, model, "pdu-area", "noAuthNoPriv", (1, 3, 6), (1, 3, 6))
    snmp_context = context.SnmpContext(snmp_engine)
    snmp_context.unregister_context_name(b"")
    chain = {int(module): {int(o): path for o, path in outlets_from_json(outlets).items()}
             for module, outlets in cfg["chain"].items()}
    firmware = PduFirmware(chain, list(cfg["families"]), int(cfg["pdu_id"]), float(cfg["reboot_s"]))
    snmp_context.register_context_name(b"", firmware)
    for responder in (cmdrsp.GetCommandResponder, cmdrsp.NextCommandResponder, cmdrsp.BulkCommandResponder,
                      cmdrsp.SetCommandResponder):
        responder(snmp_engine, snmp_context)
    snmp_engine.transport_dispatcher.job_started(1)
    ready = Path(cfg["ready"])
    ready.write_text(json.dumps({"pid": os.getpid(), "started": time.time()}))
    try:
        snmp_engine.open_dispatcher()
    finally:
        snmp_engine.close_dispatcher()


if __name__ == "__main__":
    asyncio.set_event_loop(asyncio.new_event_loop())
    serve(json.loads(Path(sys.argv[1]).read_text()))
