"""``SnmpPdu``: a switched, metered rack PDU answering SNMP on 127.0.0.1, driving switch files.

    pdu = SnmpPdu(workdir, {"1": host_a / "hw/power", "2": host_b / "hw/power"},
                  community="private").start()
    pdu.pdu_block("2", credentials="env:PDU_COMMUNITY")   # model apc_rpdu by default

One daemon, ``snmp_agent``: a pysnmp command responder whose MIB is the PDU (outlet
control, state, reboot duration and metered power of APC sPDU, APC rPDU/rPDU2 and Raritan
PX2/PX3, with OIDs copied from the MIBs in ``pdu_mibs``, not from the driver's table, so a
wrong OID in the driver fails against it). Error replies are a real agent's: notWritable,
noCreation, wrongValue, and silence for a wrong community.

``chained={2: {...}}`` daisy-chains more APC PDUs behind the first, as Network Port Sharing
does: their outlets appear only in the rPDU2 tables, under one flat index across the chain
with each row's Module and Number columns saying which PDU and outlet it is.

    pdu = SnmpPdu(workdir, {"1": a, "2": b, "3": c}, chained={2: {"1": d, "7": e}}).start()
    pdu.pdu_block("7", pdu_id=2)   # outlet 7 of the second PDU
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..procs import SimError
from .daemons import LOOPBACK, PYTHON, PowerSim, free_port, write_json
from .pdu_mibs import FAMILIES
from .switch import Outlets, outlets_to_json


class SnmpPdu(PowerSim):
    """A simulated SNMP PDU whose outlets are switch files."""

    driver = "snmp"

    def __init__(self, workdir: Path | str, outlets: Outlets, *, community: str = "private",
                 models: Iterable[str] = tuple(FAMILIES), model: str = "apc_rpdu", pdu_id: int = 1,
                 port: int = 0, poll_s: float = 0.1, reboot_s: float = 1.0,
                 chained: Mapping[int, Outlets] | None = None) -> None:
        super().__init__(workdir)
        self.outlets = {str(k): Path(v) for k, v in outlets.items()}
        # the daisy-chained PDUs behind the first (APC Network Port Sharing): module id -> outlets
        self.chained = {int(m): {str(k): Path(v) for k, v in o.items()} for m, o in (chained or {}).items()}
        self.community = community
        self.models = tuple(models)
        unknown = [m for m in (*self.models, model) if m not in FAMILIES]
        if unknown:
            raise SimError(f"unknown PDU model(s) {unknown}; known: {', '.join(FAMILIES)}")
        self.model = model
        self.pdu_id = str(pdu_id)
        self.port = port or None
        self.poll_s = poll_s
        self.reboot_s = reboot_s

    @property
    def secret(self) -> str:
        return self.community

    @property
    def address(self) -> str:
        if self.port is None:
            raise SimError("the PDU is not started")
        return f"{LOOPBACK}:{self.port}"

    def _block_options(self, outlet: str) -> dict[str, Any]:
        options: dict[str, Any] = {"model": self.model}
        if self.model == "raritan_px" and self.pdu_id != "1":
            options["pdu_id"] = int(self.pdu_id)
        return options

    def pdu_block(self, outlet: str | None, credentials: str | None = None, *, pdu_id: int = 1) -> dict[str, Any]:
        """The inventory ``pdu:`` mapping for ``outlet`` (of the chained PDU ``pdu_id`` when not 1)."""
        block = super().pdu_block(outlet, credentials)
        if pdu_id != 1:
            block["pdu_id"] = pdu_id
        return block

    def _launch(self) -> None:
        self.port = self.port or free_port(socket.SOCK_DGRAM)
        ready = self.workdir / "agent.ready"
        ready.unlink(missing_ok=True)
        config = self.workdir / "agent.json"
        chain = {"1": outlets_to_json(self.outlets),
                 **{str(m): outlets_to_json(o) for m, o in self.chained.items()}}
        write_json(config, {"port": self.port, "community": self.community, "chain": chain,
                            "families": list(self.models), "pdu_id": int(self.pdu_id), "reboot_s": self.reboot_s,
                            "ready": str(ready)})
        self.daemons.spawn("agent", [PYTHON, "-m", "reprofleet.sim.power.snmp_agent", str(config)])
        self.daemons.wait_ready("agent", ready.exists, 20.0, "the SNMP agent to listen")
