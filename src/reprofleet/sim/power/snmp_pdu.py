"""``SnmpPdu``: a switched, metered rack PDU answering SNMP on 127.0.0.1, driving switch files.

    pdu = SnmpPdu(workdir, {"1": host_a / "hw/power", "2": host_b / "hw/power"},
                  community="private").start()
    pdu.pdu_block("2", credentials="env:PDU_COMMUNITY")   # model apc_rpdu by default

One daemon, ``snmp_agent``: a pysnmp command responder whose MIB is the PDU (outlet
control, state and metered power of APC sPDU, APC rPDU/rPDU2 and Raritan PX2/PX3, with
OIDs copied from the MIBs in ``pdu_mibs``, not from the driver's table, so a wrong OID in
the driver fails against it). Error replies are a real agent's: notWritable, noCreation,
wrongValue, and silence for a wrong community.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any, Iterable

from ..procs import SimError
from .daemons import LOOPBACK, PYTHON, PowerSim, free_port, write_json
from .pdu_mibs import FAMILIES
from .switch import Outlets, outlets_to_json


class SnmpPdu(PowerSim):
    """A simulated SNMP PDU whose outlets are switch files."""

    driver = "snmp"

    def __init__(self, workdir: Path | str, outlets: Outlets, *, community: str = "private",
                 models: Iterable[str] = tuple(FAMILIES), model: str = "apc_rpdu", pdu_id: int = 1,
                 port: int = 0, poll_s: float = 0.1, reboot_s: float = 1.0) -> None:
        super().__init__(workdir)
        self.outlets = {str(k): Path(v) for k, v in outlets.items()}
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

    def _launch(self) -> None:
        self.port = self.port or free_port(socket.SOCK_DGRAM)
        ready = self.workdir / "agent.ready"
        ready.unlink(missing_ok=True)
        config = self.workdir / "agent.json"
        write_json(config, {"port": self.port, "community": self.community, "outlets": outlets_to_json(self.outlets),
                            "families": list(self.models), "pdu_id": int(self.pdu_id), "reboot_s": self.reboot_s,
                            "ready": str(ready)})
        self.daemons.spawn("agent", [PYTHON, "-m", "reprofleet.sim.power.snmp_agent", str(config)])
        self.daemons.wait_ready("agent", ready.exists, 20.0, "the SNMP agent to listen")
