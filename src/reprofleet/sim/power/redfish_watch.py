"""The simulated BMCs' power wiring: ``python -m reprofleet.sim.power.redfish_watch CONFIG``.

sushy-tools' fake driver keeps each system's PowerState in its own database and applies a
reset 1-11 s after it was asked (on the next read). This watcher reads every system's
PowerState through the emulator's Redfish API and flips the host's switch file when it
changes, so a ``ComputerSystem.Reset ForceOff`` really powers the simulated host off. A
switch flipped by someone else is sent to the emulator as a reset, so both agree again.

CONFIG (JSON): ``base`` (emulator URL), ``user``/``password`` (or null), ``systems``
(system id -> switch file), ``poll_s``, ``ready`` (written after the first full poll).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Mapping

import requests

from .switch import outlets_from_json, read_switch, write_switch


class BmcWiring:
    """Keeps each system's PowerState and its host's switch file in step."""

    def __init__(self, base: str, auth: tuple[str, str] | None, systems: Mapping[str, Path]) -> None:
        self.base = base
        self.session = requests.Session()
        self.session.auth = auth
        self.systems = dict(systems)
        self.last_bmc: dict[str, bool | None] = {}
        self.last_switch: dict[str, bool] = {}

    def bmc_on(self, system: str) -> bool | None:
        reply = self.session.get(f"{self.base}/redfish/v1/Systems/{system}", timeout=5)
        reply.raise_for_status()
        state = reply.json().get("PowerState")
        return {"On": True, "Off": False}.get(state)

    def reset(self, system: str, on: bool) -> None:
        reply = self.session.post(f"{self.base}/redfish/v1/Systems/{system}/Actions/ComputerSystem.Reset",
                                  json={"ResetType": "On" if on else "ForceOff"}, timeout=5)
        reply.raise_for_status()

    def poll(self) -> None:
        for system, path in self.systems.items():
            bmc, switch = self.bmc_on(system), read_switch(path)
            if system in self.last_bmc and bmc is not None and bmc != self.last_bmc[system]:
                write_switch(path, bmc)  # a client reset the system: the host follows
                switch = bmc
            elif self.last_switch.get(system, switch) != switch and bmc is not None and bmc != switch:
                self.reset(system, switch)  # someone flipped the switch: tell the BMC
            self.last_bmc[system], self.last_switch[system] = bmc, switch


def main(config: Mapping[str, Any]) -> None:
    auth = (config["user"], config["password"]) if config.get("password") is not None else None
    wiring = BmcWiring(config["base"], auth, outlets_from_json(config["systems"]))
    ready, poll_s = Path(config["ready"]), float(config["poll_s"])
    while True:
        try:
            wiring.poll()
        except (requests.RequestException, ValueError) as exc:  # emulator starting or busy
            sys.stderr.write(f"{time.strftime('%H:%M:%S')} poll failed: {type(exc).__name__}: {exc}\n")
            sys.stderr.flush()
        else:
            if not ready.exists():
                ready.write_text(json.dumps({"pid": os.getpid()}))
        time.sleep(poll_s)


if __name__ == "__main__":
    main(json.loads(Path(sys.argv[1]).read_text()))
