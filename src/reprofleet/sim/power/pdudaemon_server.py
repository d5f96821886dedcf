"""``PdudaemonServer``: the real pdudaemon (PyPI) with its HTTP listener on 127.0.0.1.

    server = PdudaemonServer(workdir, {"1": host_a / "hw/power", "2": host_b / "hw/power"}).start()
    server.pdu_block("2")   # driver pdudaemon, pdu rf-sim-pdu, outlet 2

pdudaemon is configured with one PDU of its ``localcmdline`` driver, whose on/off commands
run a generated script that writes the switch file of the port asked for. Two facts of
pdudaemon show through and are kept, not papered over: it cannot report outlet state,
and ``localcmdline`` ignores its command's exit status, so a port that maps to no switch
is "switched" successfully (an unknown *PDU name* is refused with HTTP 500).
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from ..procs import SimError
from .daemons import LOOPBACK, PowerSim, free_port, python_env, tcp_accepts, write_json
from .switch import Outlets

PDU_NAME = "rf-sim-pdu"


def switch_script(outlets: dict[str, Path]) -> str:
    cases = "\n".join(f"  {shlex.quote(port)}) switch={shlex.quote(str(path))} ;;" for port, path in outlets.items())
    return f"""#!/bin/sh
# pdudaemon localcmdline: <port> on|off -> the simulated host's power switch
case "$1" in
{cases}
  *) echo "no outlet $1" >&2; exit 1 ;;
esac
case "$2" in on|off) ;; *) echo "bad state $2" >&2; exit 1 ;; esac
printf '%s\\n' "$2" > "$switch.pdud.tmp" && mv -f "$switch.pdud.tmp" "$switch"
"""


def pdudaemon_path() -> str:
    beside = Path(sys.executable).parent / "pdudaemon"
    found = str(beside) if beside.exists() else shutil.which("pdudaemon")
    if not found:
        raise SimError("pdudaemon not found: pip install pdudaemon (its systemd-python dependency needs "
                       "apt-get install libsystemd-dev pkg-config gcc)")
    return found


class PdudaemonServer(PowerSim):
    """A running pdudaemon whose one PDU's ports are switch files."""

    driver = "pdudaemon"

    def __init__(self, workdir: Path | str, outlets: Outlets, *, retries: int = 2, retry_delay_s: int = 1,
                 port: int = 0) -> None:
        super().__init__(workdir)
        self.outlets = {str(k): Path(v) for k, v in outlets.items()}
        self.retries = retries
        self.retry_delay_s = retry_delay_s
        self.port = port or None

    @property
    def address(self) -> str:
        if self.port is None:
            raise SimError("pdudaemon is not started")
        return f"http://{LOOPBACK}:{self.port}"

    def _block_options(self, outlet: str) -> dict[str, Any]:
        return {"pdu": PDU_NAME}

    def _launch(self) -> None:
        self.port = self.port or free_port()
        script = self.workdir / "switch.sh"
        script.write_text(switch_script(self.outlets))
        script.chmod(0o700)
        command = f"{shlex.quote(str(script))} %s"
        config = self.workdir / "pdudaemon.conf"
        write_json(config, {
            "daemon": {"hostname": LOOPBACK, "port": self.port, "listener": "http", "logging_level": "INFO"},
            "pdus": {PDU_NAME: {"driver": "localcmdline", "cmd_on": f"{command} on", "cmd_off": f"{command} off",
                                "retries": self.retries, "retrydelay": self.retry_delay_s}},
        })
        self.daemons.spawn("pdudaemon", [pdudaemon_path(), "--conf", str(config), "--logfile", "-"], python_env())
        self.daemons.wait_ready("pdudaemon", lambda: tcp_accepts(int(self.port or 0)), 20.0,
                                "pdudaemon's HTTP listener")
