"""Your own commands: for a PDU no driver here speaks (or a script you already trust).

Selected by an inventory ``pdu:`` block like::

    pdu:
      driver: command
      address: ws07-bmc.lab               # used for {address} and the per-device lock
      on_command: "ipmitool -I lanplus -C 3 -H {address} -U admin -E chassis power on"
      off_command: "ipmitool -I lanplus -C 3 -H {address} -U admin -E chassis power off"
      status_command: "ipmitool -I lanplus -C 3 -H {address} -U admin -E chassis power status | awk '{print $NF}'"
      status_from: output                 # output (prints on/off) | exit_code (0 on, 2 off, as fence agents)
      credentials: env:WS07_BMC_PASSWORD  # optional
      secret_env: IPMI_PASSWORD           # the variable the secret is given in (ipmitool -E reads it)
      # secret_stdin: true                # also write the secret to the command's stdin
      # timeout_s: 20

The keys are ``on_command``/``off_command``, not ``on``/``off``: YAML 1.1 (PyYAML, Ansible)
reads a bare ``on:`` key as the boolean true. Commands run with ``/bin/sh -c`` and a timeout;
``{host}``, ``{address}`` and ``{outlet}`` are replaced by shell-quoted values. The secret
reaches the command only in its environment (``secret_env``, default
``REPROFLEET_POWER_SECRET``) or on its stdin (``secret_stdin``), for the tool to read
there: a command line naming ``REPROFLEET_POWER_SECRET`` at all (``$VAR``, ``${VAR}``,
``$(printenv VAR)``, ``awk 'ENVIRON["VAR"]'``) could have the shell or a tool put it into a
process argument that every user of the controller can read in ``ps``, so such a command
is refused when the inventory is loaded. The command's environment holds no other
credential the inventory or playbook names (``credentials.child_environment``). An on or off
command's non-zero exit or a timeout is retried like any transient failure. Without
``status_command`` the driver cannot read state: status is UNKNOWN and on/off are logged as
unverified.

The status command's exit status is read as ClusterLabs fence agents' ``status`` action
returns it (``fence_ipmilan -o status``, the Fence Agent API): **0 on, 2 off, 1 or anything
else an error**: the command could not tell (the device unreachable, a login refused), which
is never OFF. An error is retried like a transient failure; a status whose every try failed
is no answer (``PowerUnansweredError``), so the partition guard never counts an unreachable
device as answering. ``status_from: exit_code`` reads the state from the exit status alone;
``output`` (the default) reads it from the first word printed (``on``/``off``, ``1``/``0``
..., or a fence agent's ``Status: ON``) when the command exits 0; an exit 2 is off (one that
prints ``on`` contradicts itself: an error).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess

from reprofleet.credentials import Secret, child_environment
from reprofleet.errors import PowerError
from reprofleet.model import PowerPort
from reprofleet.power.base import DriverSettings, PowerDriver, PowerState, TransientPowerError
from reprofleet.power.log import PowerLog
from reprofleet.power.options import PowerConfigError

SECRET_ENV = "REPROFLEET_POWER_SECRET"
ON_WORDS = ("on", "1", "true", "yes", "poweron", "power_on")
OFF_WORDS = ("off", "0", "false", "no", "poweroff", "power_off")


def names_secret(template: str, variable: str) -> bool:
    """Does the shell text name ``variable`` anywhere? Every way to read it by name (``$V``,
    ``${V}``, ``$(printenv V)``, ``ENVIRON["V"]``) can put its value into some process's argv."""
    return re.search(r"(?<![A-Za-z0-9_])" + re.escape(variable) + r"(?![A-Za-z0-9_])", template) is not None


def render(template: str, host: str, address: str, outlet: str | None) -> str:
    """Fill {host}/{address}/{outlet}, each shell-quoted."""
    values = {"host": host, "address": address, "outlet": outlet or ""}
    try:
        return template.format(**{key: shlex.quote(value) for key, value in values.items()})
    except (KeyError, IndexError, ValueError) as exc:
        raise PowerConfigError(f"command {template!r}: bad placeholder {exc}; use {{host}} {{address}} {{outlet}}") from None


STATUS_ON, STATUS_OFF = 0, 2  # a fence agent's ``status``: 0 on, 2 off; 1 (or anything else) an error


def parse_status_output(stdout: str) -> PowerState:
    """The first word of the output: on/1/true... -> ON, off/0/false... -> OFF (a fence agent's
    ``Status: ON`` is read past its label)."""
    words = [word.strip(".,:;\"'") for word in stdout.strip().lower().split()]
    first = words[1] if len(words) > 1 and words[0] == "status" else words[0] if words else ""
    if first in ON_WORDS:
        return PowerState.ON
    if first in OFF_WORDS:
        return PowerState.OFF
    return PowerState.UNKNOWN


def parse_status_exit(code: int) -> PowerState:
    """A fence agent's status exit: 0 ON, 2 OFF; anything else the command could not tell
    (TransientPowerError: retried, and never read as OFF)."""
    if code == STATUS_ON:
        return PowerState.ON
    if code == STATUS_OFF:
        return PowerState.OFF
    raise TransientPowerError(f"status command exited {code}: it could not tell (0 is on, 2 is off)")


class CommandDriver(PowerDriver):
    name = "command"
    option_names = ("on_command", "off_command", "status_command", "status_from", "secret_env", "secret_stdin")
    defaults = DriverSettings(timeout_s=30.0)

    def __init__(self, port: PowerPort, host: str, log: PowerLog, *, secret: Secret | None = None) -> None:
        super().__init__(port, host, log, secret=secret)
        self.secret_env = self.options.text("secret_env", SECRET_ENV) or SECRET_ENV
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.secret_env):
            raise PowerConfigError(f"{self.where}: secret_env must be a variable name, got {self.secret_env!r}")
        self.secret_stdin = self.options.flag("secret_stdin", False)
        for key in ("on_command", "off_command", "status_command"):
            if names_secret(self.options.text(key) or "", self.secret_env):
                raise PowerConfigError(
                    f"{self.where}: {key} names {self.secret_env}, which can put the secret on a command line "
                    f"where every local user can read it with ps; let the tool read it from its environment "
                    f"or stdin (secret_stdin: true)")
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
        feed = self.secret_stdin and self._secret
        env = child_environment({self.secret_env: self._secret.reveal()} if self._secret else None)
        try:
            # Its own session, so a timeout ends the whole pipeline, not just /bin/sh.
            child = subprocess.Popen(["/bin/sh", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.PIPE if feed else subprocess.DEVNULL, env=env, text=True,
                                     start_new_session=True)
        except OSError as exc:
            raise PowerError(f"{what} command could not start: {exc.strerror}") from None
        secret_in = self._secret.reveal() + "\n" if feed and self._secret else None
        try:
            stdout, stderr = child.communicate(input=secret_in, timeout=self.settings.timeout_s)
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
        by_exit = parse_status_exit(done.returncode)  # 1 or another code: raised here, never OFF
        if self.status_from == "exit_code":
            return by_exit
        printed = parse_status_output(done.stdout)
        if by_exit is PowerState.OFF and printed is PowerState.ON:
            raise PowerError(f"status command exited {STATUS_OFF} (off) but printed on: {done.stdout.strip()[:80]!r}")
        return PowerState.OFF if by_exit is PowerState.OFF else printed
