"""``HttpPlugServer``: a simulated Tasmota or Shelly plug on 127.0.0.1, one per instance.

    plug = HttpPlugServer(workdir, "shelly2", {"0": host_a / "hw/power", "1": host_b / "hw/power"},
                          password="s3cret").start()
    plug.pdu_block("1", credentials="env:PLUG_PASS")
    plug.set_fault("hang")      # ok | error | hang | ignore_sets, while it runs
    plug.stop()

The server is its own process (``plug_server``), so a "dead PDU" is a real socket that
accepts and never answers, and a simulator started by ``sim.up`` outlives its caller.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..procs import SimError
from .daemons import LOOPBACK, PYTHON, PowerSim, tcp_accepts, write_json
from .plug_device import FAULTS
from .switch import Outlets, outlets_to_json

PERSONALITIES = {"tasmota": "tasmota", "shelly1": "shelly", "shelly2": "shelly"}


class HttpPlugServer(PowerSim):
    """One simulated plug (``tasmota``, ``shelly1`` or ``shelly2``) with its outlets."""

    def __init__(self, workdir: Path | str, personality: str, outlets: Outlets, *, user: str | None = None,
                 password: str | None = None, port: int = 0, legacy_auth: bool = False) -> None:
        if personality not in PERSONALITIES:
            raise SimError(f"unknown plug personality {personality!r}; one of {', '.join(PERSONALITIES)}")
        super().__init__(workdir)
        self.personality = personality
        self.driver = PERSONALITIES[personality]
        self.outlets = dict(outlets)
        self.user = user or "admin"
        self.password = password
        self.requested_port = port
        self.legacy_auth = legacy_auth
        self.faults_path = self.workdir / "faults.json"
        self.ready_path = self.workdir / "ready.json"
        self.port: int | None = None

    @property
    def secret(self) -> str | None:
        """What the driver's credentials must hold: ``user:password``."""
        return f"{self.user}:{self.password}" if self.password is not None else None

    def _launch(self) -> None:
        self.set_fault("ok")
        self.ready_path.unlink(missing_ok=True)
        config = {"personality": self.personality, "outlets": outlets_to_json(self.outlets), "user": self.user,
                  "password": self.password, "faults": str(self.faults_path), "ready": str(self.ready_path),
                  "port": self.requested_port, "legacy_auth": self.legacy_auth}
        config_path = self.workdir / "plug.json"
        write_json(config_path, config)
        self.daemons.spawn("plug", [PYTHON, "-m", "reprofleet.sim.power.plug_server", str(config_path)])
        self.daemons.wait_ready("plug", self.ready_path.exists, 10.0, f"the {self.personality} plug to listen")
        self.port = int(json.loads(self.ready_path.read_text())["port"])
        self.daemons.wait_ready("plug", lambda: tcp_accepts(int(self.port or 0)), 5.0, "the plug's port")

    def requests_served(self) -> list[str]:
        """``METHOD /path`` of every request the plug answered so far (from its own log)."""
        log = self.daemons.log_path("plug")
        text = log.read_text(errors="replace") if log.exists() else ""
        return [line.split(" -> ")[0] for line in text.splitlines() if line.startswith(("GET /", "POST /"))]

    def set_fault(self, mode: str) -> None:
        """Change how the running plug misbehaves: ok | error | hang | ignore_sets."""
        if mode not in FAULTS:
            raise SimError(f"unknown fault {mode!r}; one of {', '.join(FAULTS)}")
        write_json(self.faults_path, {"mode": mode})

    @property
    def address(self) -> str:
        if self.port is None:
            raise SimError("the plug is not started")
        return f"http://{LOOPBACK}:{self.port}"

    def _block_options(self, outlet: str) -> dict[str, Any]:
        if self.personality == "shelly1":
            return {"gen": 1}
        if self.personality == "shelly2":
            return {"gen": 2}
        return {}
