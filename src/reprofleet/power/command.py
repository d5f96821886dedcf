"""Your own commands: for a PDU no driver here speaks (or a script you already trust).

Selected by an inventory ``pdu:`` block like::

    pdu:
      driver: command
      address: pdu7.lab                   # used for {address} and the per-PDU lock
      outlet: 3
      on_command: "snmpset -v2c -c $REPROFLEET_POWER_SECRET {address} 1.3.6.1.4.1.99.1.{outlet} i 1"
      off_command: "snmpset -v2c -c $REPROFLEET_POWER_SECRET {address} 1.3.6.1.4.1.99.1.{outlet} i 0"
      status_command: "my-pdu-tool --host {address} --outlet {outlet} status"   # optional
      status_from: output                 # output (prints on/off) | exit_code (0 on, 1 off)
      credentials: env:PDU7_SECRET        # optional; given as $REPROFLEET_POWER_SECRET
      # timeout_s: 20

The keys are ``on_command``/``off_command``, not ``on``/``off``: YAML 1.1 (PyYAML, Ansible)
reads a bare ``on:`` key as the boolean true. Commands run with ``/bin/sh -c`` and a timeout; ``{host}``, ``{address}`` and ``{outlet}``
are replaced by shell-quoted values. The secret is passed in the environment, never on a
command line (which every user of the controller can read in ``ps``). A non-zero exit or
a timeout is retried like any transient failure. Without ``status_command`` the driver cannot
read state: status is UNKNOWN and on/off are logged as unverified.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess

from ..credentials import Secret
from ..errors import PowerError
from ..model import PowerPort
from .base import DriverSettings, PowerDriver, PowerState, TransientPowerError
from .log import PowerLog
from .options import PowerConfigError

SECRET_ENV = "REPROFLEET_POWER_SECRET"
ON_WORDS = ("on", "1", "true", "yes", "poweron", "power_on")
OFF_WORDS = ("off", "0", "false", "no", "poweroff", "power_off")


def render(template: str, host: str, address: str, outlet: str | None) -> str:
    """Fill {host}/{address}/{outlet}, each shell-quoted."""
    values = {"host": host, "address": address, "outlet": outlet or ""}
    try:
        return template.format(**{key: shlex.quote(value) for key, value in values.items()})
    except (KeyError, IndexError, ValueError) as exc:
        raise PowerConfigError(f"command {template!r}: bad placeholder {exc}; use {{host}} {{address}} {{outlet}}") from None


def parse_status_output(stdout: str) -> PowerState:
    """The first word of the output: on/1/true... -> ON, off/0/false... -> OFF."""
    words = stdout.strip().lower().split()
    first = words[0].strip(".,:;\"'") if words else ""
    if first in ON_WORDS:
        return PowerState.ON
    if first in OFF_WORDS:
        return PowerState.OFF
    return PowerState.UNKNOWN


def parse_status_exit(code: int) -> PowerState:
    if code == 0:
        return PowerState.ON
    if code == 1:
        return PowerState.OFF
    raise PowerError(f"status command exited {code} (exit_code mode: 0 is on, 1 is off)")


class CommandDriver(PowerDriver):
    name = "command"
    option_names = ("on_command", "off_command", "status_command", "status_from")
    defaults = DriverSettings(timeout_s=30.0)

    def __init__(self, port: PowerPort, host: str, log: PowerLog, *, secret: Secret | None = None) -> None:
        super().__init__(port, host, log, secret=secret)
        why = "the shell command that switches the outlet"
        self.commands = {
            PowerState.ON: render(self.options.required_text("on_command", why + " on"), host, port.address,
                                  port.outlet),
            PowerState.OFF: render(self.options.required_text("off_command", why + " off"), host, port.address,
                                   port.outlet),
        }
        status = self.options.text("status_command")
        self.status_command = render(status, host, port.address, port.outlet) if status else None
        self.status_from = self.options.choice("status_from", ("output", "exit_code"), "output")
        self.reads_state = self.status_command is not None
        self._secret = secret

    def _run(self, command: str, what: str) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ)
        if self._secret:
            env[SECRET_ENV] = self._secret.reveal()
        try:
            # Its own session, so a timeout ends the whole pipeline, not just /bin/sh.
            child = subprocess.Popen(["/bin/sh", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, env=env, text=True, start_new_session=True)
        except OSError as exc:
            raise PowerError(f"{what} command could not start: {exc.strerror}") from None
        try:
            stdout, stderr = child.communicate(timeout=self.settings.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate(timeout=5.0)
            raise TransientPowerError(f"{what} command did not finish within {self.settings.timeout_s:g}s") from None
        return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)

    def _set(self, state: PowerState) -> None:
        done = self._run(self.commands[state], state.value)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
            raise TransientPowerError(f"{state.value} command exited {done.returncode}: {tail[0][:160]}")

    def _read(self) -> PowerState:
        assert self.status_command is not None
        done = self._run(self.status_command, "status")
        if self.status_from == "exit_code":
            return parse_status_exit(done.returncode)
        if done.returncode != 0:
            raise TransientPowerError(f"status command exited {done.returncode}")
        return parse_status_output(done.stdout)
