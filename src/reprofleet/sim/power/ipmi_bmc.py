"""``IpmiBmc``: OpenIPMI's ``ipmi_sim``, one per host, each on its own UDP port.

    bmcs = IpmiBmc(workdir, {"ws01": host_a / "hw/power"}, user="admin", password="s3cret").start()
    bmcs.pdu_block("ws01", credentials="env:WS01_IPMI")   # address 127.0.0.1:<that host's port>

Each BMC gets a generated ``lan.conf`` (LAN channel on 127.0.0.1:<port>, one admin user,
``chassis_control`` pointing at a generated shell script) and a command file that adds
and enables the BMC (MC 0x20). ipmi_sim calls the script as ``<script> 0x20 get power``
(answer ``power:1``/``power:0``) or ``<script> 0x20 set power 1|0``; the script reads and
writes the host's switch file, so ``chassis power off`` really powers the host off. No
watcher is needed: the switch file *is* the chassis state. Each BMC keeps a SEL, which the
``ipmi_sel`` daemon fills through ipmi_sim's console (loopback only) as the host's power
changes and when it wedges.

OpenIPMI ships no sample configuration; Debian's package is ``openipmi``. ``ipmitool``
needs ``-I lanplus -C 3`` against it (other cipher suites stall ~10 s per call).

``latency_s`` puts a relay (``udp_delay``) in front of each BMC that holds every request
that long: a real BMC's IPMI answers take seconds (a RAKP login, a busy BMC), ipmi_sim's a
millisecond. ipmi_sim's own chassis "power cycle" keeps power off about 1 s and refuses
the optional Set Power Cycle Interval (completion code C1h), as many BMCs do.
"""

from __future__ import annotations

import shlex
import shutil
import socket
from pathlib import Path
from typing import Any

from ..procs import SimError
from .daemons import LOOPBACK, PYTHON, PowerSim, free_port, python_env, write_json

CHASSIS_SCRIPT = """#!/bin/sh
# chassis_control for ipmi_sim: <mc> get <parm>... | <mc> set <parm> <value>...
switch={switch}
mc=$1; op=$2; shift 2
case $op in
  get)
    for parm in "$@"; do
      case $parm in
        power) if [ "$(tr -d ' \\n' < "$switch" 2>/dev/null)" = on ]; then echo power:1; else echo power:0; fi ;;
        boot) echo boot:default ;;
        *) echo "invalid parameter: $parm"; exit 1 ;;
      esac
    done ;;
  set)
    while [ $# -ge 2 ]; do
      parm=$1; value=$2; shift 2
      case $parm in
        power)
          if [ "$value" = 1 ]; then state=on; else state=off; fi
          printf '%s\\n' "$state" > "$switch.ipmi.tmp" && mv -f "$switch.ipmi.tmp" "$switch" ;;
        reset|boot|identify) ;;
        *) echo "invalid parameter: $parm"; exit 1 ;;
      esac
    done ;;
  *) echo "unknown operation: $op"; exit 1 ;;
esac
"""

EMULATOR_COMMANDS = """mc_setbmc 0x20
mc_add 0x20 0 no-device-sdrs 0x23 0x09 0x08 0x9f 0x1291 0xf02 persist_sdr
sel_enable 0x20 1000 0x0a
mc_enable 0x20
"""


def lan_conf(name: str, port: int, user: str, password: str, script: Path, console: int | None = None) -> str:
    auths = "none md2 md5 straight"
    return "\n".join([
        f'name "{name}"',
        "set_working_mc 0x20",
        "  startlan 1",
        f"    addr {LOOPBACK} {port}",
        "    priv_limit admin",
        *(f"    allowed_auths_{level} {auths}" for level in ("callback", "user", "operator", "admin")),
        "    guid a123456789abcdefa123456789abcdef",
        "  endlan",
        f'  chassis_control "{script} 0x20"',
        f'  user 2 true "{user}" "{password}" admin 10 {auths}',
        *([f"console {LOOPBACK} {console}"] if console else []),
        "",
    ])


def ipmi_sim_path() -> str:
    found = shutil.which("ipmi_sim")
    if not found:
        raise SimError("ipmi_sim not found: apt-get install openipmi")
    return found


class IpmiBmc(PowerSim):
    """One ipmi_sim per host; ``pdu_block(host)`` points at that host's BMC."""

    driver = "ipmi"

    def __init__(self, workdir: Path | str, hosts: dict[str, Path] | Any, *, user: str = "admin",
                 password: str = "admin", latency_s: float = 0.0) -> None:
        super().__init__(workdir)
        self.hosts = {str(k): Path(v) for k, v in hosts.items()}
        for name in self.hosts:
            if not name.replace("-", "").replace("_", "").isalnum():
                raise SimError(f"IPMI host name {name!r}: letters, digits, - and _ only")
        if '"' in user + password or len(password) > 20:
            raise SimError("ipmi_sim users: no double quote, password at most 20 characters")
        self.user = user
        self.password = password
        self.ports: dict[str, int] = {}  # where clients reach each BMC (the relay's, with a latency)
        self.lan_ports: dict[str, int] = {}  # where ipmi_sim itself listens
        self.consoles: dict[str, int] = {}  # ipmi_sim's console (emulator commands such as sel_add)
        self.latency_s = latency_s

    @property
    def secret(self) -> str:
        return f"{self.user}:{self.password}"

    @property
    def address(self) -> str:
        raise SimError("IpmiBmc runs one BMC per host: use address_of(host)")

    def address_of(self, host: str) -> str:
        if host not in self.ports:
            raise SimError(f"no BMC for {host!r} (started: {', '.join(self.ports) or 'none'})")
        return f"{LOOPBACK}:{self.ports[host]}"

    def pdu_block(self, outlet: str | None, credentials: str | None = None) -> dict[str, Any]:
        block: dict[str, Any] = {"driver": self.driver, "address": self.address_of(str(outlet))}
        if credentials:
            block["credentials"] = credentials
        return block

    def _launch(self) -> None:
        for name, switch in self.hosts.items():
            folder = self.workdir / name
            shutil.rmtree(folder, ignore_errors=True)
            (folder / "state").mkdir(parents=True)
            script = folder / "chassis_control.sh"
            script.write_text(CHASSIS_SCRIPT.format(switch=shlex.quote(str(switch))))
            script.chmod(0o700)
            port = free_port(socket.SOCK_DGRAM)
            self.consoles[name] = free_port()
            (folder / "lan.conf").write_text(lan_conf(f"rfsim-{name}", port, self.user, self.password, script,
                                                      self.consoles[name]))
            (folder / "lan.conf").chmod(0o600)
            (folder / "bmc.emu").write_text(EMULATOR_COMMANDS)
            self.daemons.spawn(f"ipmi_sim-{name}", [
                ipmi_sim_path(), "-c", str(folder / "lan.conf"), "-f", str(folder / "bmc.emu"),
                "-s", str(folder / "state"), "-n", "-p",
            ], python_env())
            self.ports[name] = self.lan_ports[name] = port
        for name, port in self.lan_ports.items():
            self.daemons.wait_ready(f"ipmi_sim-{name}", lambda p=port: _rmcp_ping(p), 10.0,
                                    f"ipmi_sim for {name} to answer an RMCP ping")
        if self.latency_s > 0:
            for name in self.hosts:
                self.ports[name] = self._start_relay(name)
        self._start_sel_writer()

    def _start_relay(self, name: str) -> int:
        port = free_port(socket.SOCK_DGRAM)
        ready = self.workdir / name / "relay.ready"
        ready.unlink(missing_ok=True)
        config = self.workdir / name / "relay.json"
        write_json(config, {"listen": port, "target": self.lan_ports[name], "latency_s": self.latency_s,
                            "ready": str(ready)})
        self.daemons.spawn(f"relay-{name}", [PYTHON, "-m", "reprofleet.sim.power.udp_delay", str(config)])
        self.daemons.wait_ready(f"relay-{name}", ready.exists, 10.0, f"the latency relay of {name}")
        return port

    def _start_sel_writer(self) -> None:
        ready = self.workdir / "sel.ready"
        ready.unlink(missing_ok=True)
        config = self.workdir / "sel.json"
        write_json(config, {"poll_s": 0.2, "ready": str(ready), "bmcs": {
            name: {"console": self.consoles[name], "lan": self.lan_ports[name], "user": self.user,
                   "password": self.password, "switch": str(switch)} for name, switch in self.hosts.items()}})
        self.daemons.spawn("sel", [PYTHON, "-m", "reprofleet.sim.power.ipmi_sel", str(config)])
        self.daemons.wait_ready("sel", ready.exists, 30.0, "every BMC's SEL clock to be set")


def _rmcp_ping(port: int) -> bool:
    """ASF presence ping over RMCP (what ``rmcp_ping`` sends): any pong means listening."""
    ping = bytes([0x06, 0x00, 0xFF, 0x06, 0x00, 0x00, 0x11, 0xBE, 0x80, 0x00, 0x00, 0x00])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(0.2)
        try:
            sock.sendto(ping, (LOOPBACK, port))
            return bool(sock.recv(512))
        except OSError:
            return False
