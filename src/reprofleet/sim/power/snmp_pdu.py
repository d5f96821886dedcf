"""``SnmpPdu``: a switched rack PDU answering SNMP on 127.0.0.1, driving switch files.

    pdu = SnmpPdu(workdir, {"1": host_a / "hw/power", "2": host_b / "hw/power"},
                  community="private").start()
    pdu.pdu_block("2", credentials="env:PDU_COMMUNITY")   # model apc_rpdu by default

Two real daemons: snmpsim's command responder serving a generated ``.snmprec`` (APC rPDU
and sPDU outlet control with ``writecache`` + ``vlist``, so out-of-range SETs fail with
wrongValue, and Raritan PDU2-MIB rows), and ``snmp_watch`` acting on what clients SET.

snmpsim refuses to run as root unless it drops privileges, after which the interpreter,
the venv and the data must be readable by that user; with ``SNMPSIM_ALLOW_ROOT=true``
(snmpsim's own switch) it keeps running as root instead, which is what a loopback test
simulator wants: no dependence on where the project was cloned.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path
from typing import Any, Iterable

from ...power.snmp_oids import OUTLET_MODELS, OutletOids
from ..procs import SimError
from .daemons import LOOPBACK, PYTHON, PowerSim, free_port, python_env, write_json
from .switch import Outlets, outlets_to_json, read_switch

SYSTEM_ROWS = (
    ("1.3.6.1.2.1.1.1.0", "4", "APC Web/SNMP Management Card (MB:v4.4.0 PF:v6.9.6 AOS) (reprofleet simulator)"),
    ("1.3.6.1.2.1.1.2.0", "6", "1.3.6.1.4.1.318.1.3.4.5"),
    ("1.3.6.1.2.1.1.5.0", "4", "rf-sim-pdu"),
)


def _oid_key(oid: str) -> tuple[int, ...]:
    return tuple(int(part) for part in oid.split("."))


def _vlist(low: int, high: int) -> str:
    return f"vlist=lt:{low}:wrongvalue:gt:{high}:wrongvalue"


def snmprec_lines(outlets: dict[str, bool], models: Iterable[OutletOids], pdu_id: str) -> list[str]:
    """The data file: one writecache row per control and status OID, sorted by OID."""
    rows: dict[str, str] = {oid: f"{oid}|{tag}|{value}" for oid, tag, value in SYSTEM_ROWS}
    for model in models:
        commands = [v for v in (model.set_on, model.set_off, model.set_cycle) if v is not None]
        for outlet, on in outlets.items():
            control = model.control(outlet, pdu_id)
            value = model.set_on if on else model.set_off
            rows[control] = f"{control}|2:writecache|value={value},{_vlist(min(commands), max(commands))}"
            status = model.status(outlet, pdu_id)
            if status != control:
                rows[status] = f"{status}|2:writecache|value={model.state_on if on else model.state_off}"
    return [rows[oid] for oid in sorted(rows, key=_oid_key)]


def responder_path() -> str:
    beside = Path(sys.executable).parent / "snmpsim-command-responder"
    found = str(beside) if beside.exists() else shutil.which("snmpsim-command-responder")
    if not found:
        raise SimError("snmpsim-command-responder not found: pip install snmpsim 'pysmi>=2,<3'")
    return found


class SnmpPdu(PowerSim):
    """A simulated SNMP PDU whose outlets are switch files."""

    driver = "snmp"

    def __init__(self, workdir: Path | str, outlets: Outlets, *, community: str = "private",
                 models: Iterable[str] = tuple(OUTLET_MODELS), model: str = "apc_rpdu", pdu_id: int = 1,
                 port: int = 0, poll_s: float = 0.1, reboot_s: float = 1.0) -> None:
        super().__init__(workdir)
        self.outlets = {str(k): Path(v) for k, v in outlets.items()}
        self.community = community
        self.models = tuple(models)
        unknown = [m for m in (*self.models, model) if m not in OUTLET_MODELS]
        if unknown:
            raise SimError(f"unknown PDU model(s) {unknown}; known: {', '.join(OUTLET_MODELS)}")
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
        data, cache = self.workdir / "data", self.workdir / "cache"
        for folder in (data, cache):
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
        states = {outlet: read_switch(path) for outlet, path in self.outlets.items()}
        rows = snmprec_lines(states, (OUTLET_MODELS[m] for m in self.models), self.pdu_id)
        (data / f"{self.community}.snmprec").write_text("\n".join(rows) + "\n")
        env = python_env({"SNMPSIM_ALLOW_ROOT": "true"} if os.geteuid() == 0 else {})
        self.daemons.spawn("snmpsim", [
            responder_path(), f"--data-dir={data}", f"--cache-dir={cache}",
            f"--agent-udpv4-endpoint={LOOPBACK}:{self.port}", "--logging-method=stderr", "--log-level=error",
        ], env)
        self._start_watcher()

    def _start_watcher(self) -> None:
        ready = self.workdir / "watch.ready"
        ready.unlink(missing_ok=True)
        config = self.workdir / "watch.json"
        write_json(config, {"port": self.port, "community": self.community, "outlets": outlets_to_json(self.outlets),
                            "models": list(self.models), "pdu_id": self.pdu_id, "poll_s": self.poll_s,
                            "reboot_s": self.reboot_s, "ready": str(ready)})
        self.daemons.spawn("watcher", [PYTHON, "-m", "reprofleet.sim.power.snmp_watch", str(config)])
        # The watcher's first poll needs the agent to answer: its ready file means both are up.
        self.daemons.wait_ready("watcher", ready.exists, 20.0, "the SNMP agent to answer the watcher's first poll")
