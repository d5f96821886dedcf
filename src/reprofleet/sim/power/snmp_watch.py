"""The simulated PDU's "relay board": ``python -m reprofleet.sim.power.snmp_watch CONFIG``.

snmpsim's ``writecache`` remembers what a client SETs, but nothing acts on it and each OID
is remembered on its own (a status OID does not follow its control OID). This watcher
plays the PDU's firmware with a real SNMP client: it polls the control OIDs of every
outlet, and when one changes it switches the outlet's switch file (a reboot command is
off, a pause, on) and writes every model's control and status OIDs to match. A switch
file changed by someone else (a test, the fleet) is mirrored into the OIDs the same way.

CONFIG (JSON): ``port``, ``community``, ``outlets`` (id -> switch file), ``models``,
``pdu_id``, ``poll_s``, ``reboot_s``, ``ready`` (a file written after the first poll).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from pysnmp.hlapi.v3arch.asyncio import (
    CommunityData, ContextData, ObjectIdentity, ObjectType, SnmpEngine, UdpTransportTarget, get_cmd, set_cmd,
)
from pysnmp.proto.rfc1902 import Integer32

from ...power.snmp_oids import OUTLET_MODELS, OutletOids
from .switch import outlets_from_json, read_switch, write_switch

CHUNK = 24  # var-binds per request, well under snmpsim's limit


class SnmpLink:
    """A small synchronous-looking SNMP v2c client on one event loop (get many, set one)."""

    def __init__(self, port: int, community: str, timeout_s: float = 1.0) -> None:
        self.engine = SnmpEngine()
        self.auth = CommunityData(community, mpModel=1)
        self.port = port
        self.timeout_s = timeout_s

    async def get(self, oids: list[str]) -> dict[str, int | None]:
        target = await UdpTransportTarget.create(("127.0.0.1", self.port), timeout=self.timeout_s, retries=1)
        values: dict[str, int | None] = {}
        for start in range(0, len(oids), CHUNK):
            chunk = oids[start:start + CHUNK]
            error, status, _, binds = await get_cmd(self.engine, self.auth, target, ContextData(),
                                                    *(ObjectType(ObjectIdentity(oid)) for oid in chunk))
            if error or status:
                raise RuntimeError(f"GET failed: {error or status.prettyPrint()}")
            for oid, (_, value) in zip(chunk, binds):
                try:
                    values[oid] = int(value)
                except (TypeError, ValueError):
                    values[oid] = None
        return values

    async def set(self, oid: str, value: int) -> None:
        target = await UdpTransportTarget.create(("127.0.0.1", self.port), timeout=self.timeout_s, retries=1)
        error, status, _, _ = await set_cmd(self.engine, self.auth, target, ContextData(),
                                            ObjectType(ObjectIdentity(oid), Integer32(value)))
        if error or status:
            raise RuntimeError(f"SET {oid}={value} failed: {error or status.prettyPrint()}")


class RelayBoard:
    """The outlets of one simulated PDU, seen through every configured model's OIDs."""

    def __init__(self, link: SnmpLink, outlets: Mapping[str, Path], models: Iterable[OutletOids], pdu_id: str,
                 reboot_s: float) -> None:
        self.link = link
        self.outlets = dict(outlets)
        self.models = tuple(models)
        self.pdu_id = pdu_id
        self.reboot_s = reboot_s
        self.last_control: dict[str, int | None] = {}
        self.last_switch: dict[str, bool] = {}

    def controls(self, outlet: str) -> list[tuple[OutletOids, str]]:
        return [(model, model.control(outlet, self.pdu_id)) for model in self.models]

    async def poll(self) -> None:
        oids: list[str] = []
        for outlet in self.outlets:
            for model in self.models:
                oids.extend(dict.fromkeys((model.control(outlet, self.pdu_id), model.status(outlet, self.pdu_id))))
        values = await self.link.get(oids)
        for outlet, path in self.outlets.items():
            await self._settle_outlet(outlet, path, values)

    async def _settle_outlet(self, outlet: str, path: Path, values: Mapping[str, int | None]) -> None:
        switch_on = read_switch(path)
        changed = [(model, values[oid]) for model, oid in self.controls(outlet)
                   if outlet in self.last_switch and values[oid] != self.last_control.get(oid)]
        if changed:
            model, value = changed[0]
            if value == model.set_cycle:
                write_switch(path, False)
                await asyncio.sleep(self.reboot_s)
                switch_on = True
            elif value in (model.set_on, model.set_off):
                switch_on = value == model.set_on
            write_switch(path, switch_on)
        await self._mirror(outlet, switch_on, values)
        self.last_switch[outlet] = switch_on

    async def _mirror(self, outlet: str, on: bool, values: Mapping[str, int | None]) -> None:
        """Make every model's control and status OIDs say what the switch says."""
        for model in self.models:
            control = model.control(outlet, self.pdu_id)
            wanted = model.set_on if on else model.set_off
            if values.get(control) != wanted:
                await self.link.set(control, wanted)
            self.last_control[control] = wanted
            status = model.status(outlet, self.pdu_id)
            state = model.state_on if on else model.state_off
            if status != control and values.get(status) != state:
                await self.link.set(status, state)


async def run(config: Mapping[str, Any]) -> None:
    link = SnmpLink(int(config["port"]), str(config["community"]))
    board = RelayBoard(link, outlets_from_json(config["outlets"]), (OUTLET_MODELS[m] for m in config["models"]),
                       str(config["pdu_id"]), float(config["reboot_s"]))
    ready = Path(config["ready"])
    poll_s = float(config["poll_s"])
    while True:
        try:
            await board.poll()
        except RuntimeError as exc:  # the agent still starting, a lost datagram: try again
            sys.stderr.write(f"{time.strftime('%H:%M:%S')} poll failed: {exc}\n")
            sys.stderr.flush()
        else:
            if not ready.exists():
                ready.write_text(json.dumps({"pid": os.getpid()}))
        await asyncio.sleep(poll_s)


if __name__ == "__main__":
    asyncio.run(run(json.loads(Path(sys.argv[1]).read_text())))
