"""The simulated PDU's firmware: ``python -m reprofleet.sim.power.snmp_agent CONFIG``.

An SNMP v1/v2c agent (pysnmp's command responders, the same protocol engine snmpsim
uses) whose MIB is the PDU itself: a GET of an outlet's state reads its switch file, a SET
of its control OID switches it, the metered power reads ``meter.wall_watts``. The OIDs
come from ``pdu_mibs`` (copied from the MIBs), never from the driver's table.

Error replies are what real agents send: SET on a read-only column is ``notWritable``, on
an outlet the PDU does not have ``noCreation``, a value the MIB does not define
``wrongValue``; a GET of a missing outlet is ``noSuchInstance``; a request with a wrong
community gets no answer at all.

CONFIG (JSON): ``port``, ``community``, ``outlets`` (id -> switch file), ``families``,
``pdu_id``, ``reboot_s``, ``ready`` (a file written once listening).
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


class PduFirmware(AbstractMibInstrumController):
    """Answers GET/GETNEXT/SET for every outlet of every configured PDU family."""

    def __init__(self, outlets: Mapping[str, Path], families: list[str], pdu_id: int, reboot_s: float) -> None:
        self.outlets = {int(k): Path(v) for k, v in outlets.items()}
        self.columns = [column for family in families for column in FAMILIES[family]]
        self.pdu_id = pdu_id
        self.reboot_s = reboot_s

    # -- the table ------------------------------------------------------------------------

    def _row(self, column: MibColumn, outlet: int) -> Oid:
        index = (self.pdu_id, outlet) if column.by_pdu else (outlet,)
        return column.prefix + index + column.suffix

    def _find(self, name: Oid) -> tuple[MibColumn, int] | None:
        """The column and outlet index ``name`` addresses (the outlet may not exist), or None."""
        for column in self.columns:
            size = len(column.prefix)
            if name[:size] != column.prefix or len(name) != size + (2 if column.by_pdu else 1) + len(column.suffix):
                continue
            rest = name[size:]
            if column.suffix and rest[-len(column.suffix):] != column.suffix:
                continue
            if column.by_pdu and rest[0] != self.pdu_id:
                return column, -1
            return column, rest[1] if column.by_pdu else rest[0]
        return None

    def _value(self, column: MibColumn, outlet: int) -> Any:
        path = self.outlets[outlet]
        if column.column is Column.WATTS:
            return rfc1902.Unsigned32(int(round(wall_watts(path)))) if column.by_pdu else \
                rfc1902.Integer32(int(round(wall_watts(path))))
        return rfc1902.Integer32(column.on if read_switch(path) else column.off)

    def _all(self) -> list[tuple[Oid, Any]]:
        rows: list[tuple[Oid, Any]] = [(name, rfc1902.OctetString(text)) for name, text in SYSTEM.items()]
        for column in self.columns:
            rows.extend((self._row(column, outlet), (column, outlet)) for outlet in self.outlets)
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
            if found is None or found[1] not in self.outlets:
                answers.append((name, rfc1905.noSuchInstance if found else rfc1905.noSuchObject))
                continue
            answers.append((name, self._value(*found)))
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
            if found is None or found[0].column is not Column.CONTROL:
                raise smi_error.NotWritableError(name=name, idx=index)
            column, outlet = found
            if outlet not in self.outlets:
                raise smi_error.NoCreationError(name=name, idx=index)
            if not isinstance(value, rfc1902.Integer32) or int(value) not in column.allowed:
                raise smi_error.WrongValueError(name=name, idx=index)
        for name, value in var_binds:
            found = self._find(tuple(name))
            assert found is not None  # checked above
            self._command(*found, int(value))
        return [(name, value) for name, value in var_binds]

    def _command(self, column: MibColumn, outlet: int, value: int) -> None:
        path = self.outlets[outlet]
        if value == column.reboot:
            write_switch(path, False)
            threading.Timer(self.reboot_s, write_switch, args=(path, True)).start()
        elif value in (column.on, column.off):
            write_switch(path, value == column.on)
        # delayed commands and cancelPendingCommand are accepted and do nothing here


def serve(cfg: Mapping[str, Any]) -> None:
    snmp_engine = engine.SnmpEngine()
    transport = udp.UdpTransport().open_server_mode(("127.0.0.1", int(cfg["port"])))
    config.add_transport(snmp_engine, udp.DOMAIN_NAME, transport)
    config.add_v1_system(snmp_engine, "pdu-area", str(cfg["community"]))
    for model in (1, 2):  # SNMPv1 and v2c: read and write the whole enterprise and mib-2 trees
        config.add_vacm_user(snmp_engine, model, "pdu-area", "noAuthNoPriv", (1, 3, 6), (1, 3, 6))
    snmp_context = context.SnmpContext(snmp_engine)
    snmp_context.unregister_context_name(b"")
    firmware = PduFirmware(outlets_from_json(cfg["outlets"]), list(cfg["families"]), int(cfg["pdu_id"]),
                           float(cfg["reboot_s"]))
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
