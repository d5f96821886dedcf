"""The simulated IPMI BMCs' event logs: ``python -m reprofleet.sim.power.ipmi_sel CONFIG``.

ipmi_sim keeps a real SEL (``sel_enable`` in its command file) that clients read with Get
SEL Entry, but nothing in it adds entries when the chassis power changes. This daemon
watches each host (switch file, frozen flag: see host_events) and adds the records a
server BMC would, through ipmi_sim's console (``sel_add``): power off (Power Unit, "Power
off / Power down" asserted), power on (the same deasserted, then System Boot "initiated by
power up") and a wedge (Critical Interrupt, "Bus uncorrectable error": a GPU's PCIe fatal
error as firmware-first AER logs it).

ipmi_sim stamps records with its own SEL clock, which starts near the machine's uptime,
so the daemon first sets each BMC's SEL time to now (Set SEL Time, over its LAN channel).

CONFIG (JSON): ``bmcs`` (host -> {console, lan, user, password, switch}), ``poll_s``,
``ready`` (written once every SEL clock is set).
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any, Mapping

from .daemons import LOOPBACK
from .host_events import HostEventKind, HostWatch

BMC_ADDRESS = 0x20
GENERATOR = (0x20, 0x00)  # the BMC itself
EVM_REV = 0x04
ASSERTED, DEASSERTED = 0x6F, 0xEF  # sensor-specific event type, with the deassertion bit
# kind -> [(sensor type, sensor number, event dir/type, offset)]
RECORDS: Mapping[HostEventKind, tuple[tuple[int, int, int, int], ...]] = {
    HostEventKind.POWER_OFF: ((0x09, 0x01, ASSERTED, 0x00),),
    HostEventKind.POWER_ON: ((0x09, 0x01, DEASSERTED, 0x00), (0x1D, 0x02, ASSERTED, 0x00)),
    HostEventKind.WEDGE: ((0x13, 0x03, ASSERTED, 0x08),),
}


def sel_add_line(sensor_type: int, sensor_number: int, dir_type: int, offset: int) -> str:
    """An ipmi_sim console ``sel_add`` of one system event record (timestamp 0: the BMC stamps it)."""
    body = [0, 0, 0, 0, *GENERATOR, EVM_REV, sensor_type, sensor_number, dir_type, offset, 0xFF, 0xFF]
    return f"sel_add 0x{BMC_ADDRESS:02x} 0x02 " + " ".join(f"0x{b:02x}" for b in body)


def console(port: int, lines: list[str], timeout_s: float = 5.0) -> str:
    """Send command lines to ipmi_sim's console; return what it answered (prompt to prompt)."""
    answer = b""
    with socket.create_connection((LOOPBACK, port), timeout=timeout_s) as sock:
        answer += _until_prompt(sock)
        for line in lines:
            sock.sendall(line.encode() + b"\n")
            answer += _until_prompt(sock)
    return answer.decode(errors="replace")


def _until_prompt(sock: socket.socket) -> bytes:
    got = b""
    for _ in range(100):  # bounded: the socket's timeout ends a silent console
        chunk = sock.recv(4096)
        if not chunk:
            break
        got += chunk
        if got.rstrip().endswith(b">"):
            break
    return got


def set_sel_time(lan_port: int, user: str, password: str) -> None:
    """Set Get SEL Time's clock to now (ipmi_sim starts it near the uptime)."""
    from pyghmi.ipmi import command as ipmi_command  # nosec B415  # the simulated BMC's own clock, set over its loopback IPMI port

    session = ipmi_command.Command(bmc=LOOPBACK, userid=user, password=password, port=lan_port)
    try:
        reply = session.raw_command(netfn=0x0A, command=0x49, data=list(struct.pack("<I", int(time.time()))))
        if reply.get("code"):
            raise RuntimeError(f"Set SEL Time: completion code {reply['code']}")
    finally:
        session.ipmi_session.logout()


def main(config: Mapping[str, Any]) -> None:
    bmcs = config["bmcs"]
    for name, bmc in bmcs.items():
        set_sel_time(int(bmc["lan"]), str(bmc["user"]), str(bmc["password"]))
    watches = {name: HostWatch(Path(bmc["switch"])) for name, bmc in bmcs.items()}
    Path(config["ready"]).write_text(json.dumps({"bmcs": sorted(bmcs)}))
    poll_s = float(config.get("poll_s", 0.2))
    while True:
        for name, watch in watches.items():
            lines = [sel_add_line(*record) for event in watch.poll() for record in RECORDS[event.kind]]
            if not lines:
                continue
            try:
                console(int(bmcs[name]["console"]), lines)
            except OSError as exc:  # ipmi_sim restarting: this entry is lost, as on a real BMC
                sys.stderr.write(f"{time.strftime('%H:%M:%S')} {name}: sel_add failed: {exc}\n")
                sys.stderr.flush()
        time.sleep(poll_s)


if __name__ == "__main__":
    main(json.loads(Path(sys.argv[1]).read_text()))
