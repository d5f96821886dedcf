"""Any ClusterLabs fence agent (``fence_ipmilan``, ``fence_redfish``, ``fence_apc_snmp``, ``fence_idrac``
...): the devices a Pacemaker, Ironic or Medik8s lab already trusts, through the agent it already runs.

Selected by an inventory ``pdu:`` block like::

    pdu:
      driver: fence
      agent: fence_ipmilan          # any fence_* program on PATH (or /usr/sbin)
      address: ws07-bmc.lab         # given to the agent as ip=
      # outlet: 4                   # given as plug= (a PDU's outlet, a Redfish system id)
      credentials: env:WS07_BMC     # "user:password" -> username= and password=; a bare secret -> password=
      # secret_option: community    # the agent option the secret goes to (fence_apc_snmp's community)
      agent_options:                # any other option the agent's metadata lists
        lanplus: true
        cipher: 3

What the agent is asked, and how its answers are read (the Fence Agent API; see ``fence_agent``):

- every option travels as a ``name=value`` line on the agent's stdin, the secret too, never on
  its command line (the agent itself may hand it to a tool's argv: ``fence_ipmilan`` runs
  ``ipmitool -P``, ``fence_apc_snmp`` runs ``snmpget -c``; that is the agent's choice);
- the option names are checked against the agent's ``metadata`` when the inventory is loaded
  (the agent only warns about an unknown one and goes on with its default);
- ``status``: exit 0 on, 2 off; 1 (it could not tell) or a timeout is retried and is never
  "off"; ``on``/``off``: exit 0 done, 1 or a timeout retried; any other exit code is an answer
  the API does not define: a definite error;
- the cycle is ours, not the agent's ``reboot``: off, read back off, dwell, on, read back on,
  through the base driver, like every other device (so the read-back, retries, the device
  lock and the power log are the same); the agent's ``method=cycle`` may report success
  before the node is off;
- ``diag()`` (an NMI) where the agent's metadata lists the ``diag`` action: sent once, never
  retried (a second NMI could land in the kdump the first one started).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from reprofleet.credentials import Secret, split_user_password
from reprofleet.errors import PowerError
from reprofleet.model import PowerPort
from reprofleet.power.base import DriverSettings, PowerDriver, PowerState, TransientPowerError
from reprofleet.power.locks import device_lock
from reprofleet.power.log import PowerLog
from reprofleet.power.options import PowerConfigError
from reprofleet.power.drivers.fence_agent import (
    AgentMetadata, AgentRun, AgentTimeout, find_agent, metadata_for, run_agent,
)

STATUS_ON, STATUS_OFF, FAILED = 0, 2, 1  # the Fence Agent API's exit codes
# Options the driver sets itself, or that would put a secret into the inventory or a debug file.
RESERVED = {
    "action": "the driver sets the action",
    "ip": "give it as the pdu block's address", "ipaddr": "give it as the pdu block's address",
    "plug": "give it as the pdu block's outlet", "port": "give it as the pdu block's outlet",
    "password": "a secret: give it by 'credentials: env:VAR' or 'file:/path'",
    "passwd": "a secret: give it by 'credentials: env:VAR' or 'file:/path'",
    "community": "a secret: give it by 'credentials' and 'secret_option: community'",
    "password_script": "runs a program the agent trusts blindly: give the secret by 'credentials'",
    "passwd_script": "runs a program the agent trusts blindly: give the secret by 'credentials'",
    "verbose": "the agent's verbose output echoes its commands, secrets included",
    "debug_file": "the agent's debug output echoes its commands, secrets included",
    "debug": "the agent's debug output echoes its commands, secrets included",
    "method": "the cycle is the driver's own (off, read back off, dwell, on)",
}


def agent_value(value: Any) -> str:
    """An inventory value as the agent reads it: booleans as 1/0, numbers and text as written."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise ValueError(f"must be a string, number or true/false, got {type(value).__name__}")


def status_from_exit(code: int, agent: str) -> PowerState:
    """``status``: 0 ON, 2 OFF; 1 the agent could not tell (retried, never OFF); anything else undefined."""
    if code == STATUS_ON:
        return PowerState.ON
    if code == STATUS_OFF:
        return PowerState.OFF
    if code == FAILED:
        raise TransientPowerError(f"{agent} status exited 1: it could not tell (0 is on, 2 is off)")
    raise PowerError(f"{agent} status exited {code}, which the Fence Agent API does not define")


def switch_from_exit(code: int, agent: str, action: str, tail: str) -> None:
    """``on``/``off``: 0 done; 1 failed (retried: no answer and a refused login look the same); else undefined."""
    if code == 0:
        return
    said = f": {tail}" if tail else ""
    if code == FAILED:
        raise TransientPowerError(f"{agent} {action} exited 1{said}")
    raise PowerError(f"{agent} {action} exited {code}, which the Fence Agent API does not define{said}")


def last_line(run: AgentRun) -> str:
    """The agent's last line of complaint, short (the base driver scrubs secrets from it)."""
    lines = [line.strip() for line in (run.stderr or run.stdout).splitlines() if line.strip()]
    return lines[-1][:160] if lines else ""


class FenceDriver(PowerDriver):
    name = "fence"
    option_names = ("agent", "agent_options", "secret_option")
    # The agent waits for the state itself (power_timeout 20 s by default) before it exits.
    defaults = DriverSettings(timeout_s=60.0, tries=2)

    def __init__(self, port: PowerPort, host: str, log: PowerLog, *, secret: Secret | None = None) -> None:
        super().__init__(port, host, log, secret=secret)
        self.agent = self.options.required_text("agent", "the fence agent's program name, e.g. fence_ipmilan")
        try:
            self.path = find_agent(self.agent)
            self.metadata = metadata_for(self.path)
        except PowerError as exc:
            raise PowerConfigError(f"{self.where}: pdu option agent: {exc}", field="agent") from None
        self.secret_option = self.options.text("secret_option", "password") or "password"
        self.agent_options = self._agent_options()
        self._base_options = {**self._port_options(), **self.agent_options}
        self._secret_options = self._secret_lines(secret)
        self._check_required()
        if not {"on", "off"} <= self.metadata.actions:
            raise PowerConfigError(f"{self.where}: pdu option agent: {self.agent} has no on/off actions",
                                   field="agent")
        self.reads_state = "status" in self.metadata.actions
        self.has_diag = "diag" in self.metadata.actions
        self.sends_nmi = self.has_diag

    # -- configuration, checked against the agent's metadata when the inventory is loaded ----

    def _unknown(self, name: str, field: str) -> PowerConfigError:
        return PowerConfigError(
            f"{self.where}: pdu option {field}: {self.agent} has no option {name!r} (its metadata lists: "
            f"{', '.join(sorted(self.metadata.parameters))})", field=field)

    def _agent_options(self) -> dict[str, str]:
        raw = self.options.raw.get("agent_options") or {}
        if not isinstance(raw, Mapping):
            raise PowerConfigError(f"{self.where}: pdu option agent_options must be a mapping of the agent's "
                                   "options", field="agent_options")
        chosen: dict[str, str] = {}
        for key, value in raw.items():
            name, field = str(key), f"agent_options.{key}"
            if name in RESERVED:
                raise PowerConfigError(f"{self.where}: pdu option {field}: {RESERVED[name]}", field=field)
            if not self.metadata.takes(name):
                raise self._unknown(name, field)
            try:
                text = agent_value(value)
            except ValueError as exc:
                raise PowerConfigError(f"{self.where}: pdu option {field} {exc}", field=field) from None
            if "\n" in text or "\r" in text:
                raise PowerConfigError(f"{self.where}: pdu option {field} must be one line", field=field)
            chosen[name] = text
        return chosen

    def _port_options(self) -> dict[str, str]:
        """``ip`` from the address and ``plug`` from the outlet, where the agent takes them."""
        port = self.port
        given = {}
        if self.metadata.takes("ip"):
            given["ip"] = port.address
        if port.outlet is not None:
            if not self.metadata.takes("plug"):
                raise PowerConfigError(f"{self.where}: pdu option outlet: {self.agent} switches one device, "
                                       "it takes no plug (outlet)", field="outlet")
            given["plug"] = port.outlet
        for name, value in given.items():
            if "\n" in value or "\r" in value:
                raise PowerConfigError(f"{self.where}: pdu {name} must be one line", field=name)
        return given

    def _secret_lines(self, secret: Secret | None) -> dict[str, Secret]:
        """The secret's stdin lines: ``user:password`` splits into username and password."""
        if not self.metadata.takes(self.secret_option):
            raise self._unknown(self.secret_option, "secret_option")
        if secret is None:
            return {}
        if self.secret_option != "password":
            return {self.secret_option: secret}
        user, password = split_user_password(secret, "")
        self._secrets.append(password)  # the password alone, scrubbed from any text too
        lines = {"password": password}
        if user:
            if "username" in self.agent_options:
                raise PowerConfigError(f"{self.where}: pdu option agent_options.username: the credentials give "
                                       "the user already (user:password)", field="agent_options.username")
            lines["username"] = Secret(user)
        return lines

    def _check_required(self) -> None:
        given = {*self._base_options, *self._secret_options, "action"}
        missing = sorted(name for name in self.metadata.required if name not in given)
        if missing:
            raise PowerConfigError(f"{self.where}: {self.agent} requires option(s) {', '.join(missing)}: "
                                   "give them under agent_options (a secret by credentials)", field="agent_options")

    @property
    def device_key(self) -> str:
        """One BMC or PDU: the address, and the agent's ``ipport`` where one is given (simulators share 127.0.0.1)."""
        ipport = self.agent_options.get("ipport")
        return f"{super().device_key}:{ipport}" if ipport else super().device_key

    # -- one request each ---------------------------------------------------------------------

    def _run(self, action: str) -> AgentRun:
        options = {**self._base_options, **{k: v.reveal() for k, v in self._secret_options.items()}, "action": action}
        try:
            return run_agent(self.path, options, self.settings.timeout_s)
        except AgentTimeout as exc:
            raise TransientPowerError(str(exc)) from None

    def _read(self) -> PowerState:
        return status_from_exit(self._run("status").returncode, self.agent)

    def _set(self, state: PowerState) -> None:
        done = self._run(state.value)
        switch_from_exit(done.returncode, self.agent, state.value, last_line(done))

    # -- the NMI --------------------------------------------------------------------------------

    def nmi(self) -> None:
        """The recovery ladder's NMI: the agent's ``diag`` (logged as ``diag``, sent once)."""
        self.diag()

    def diag(self) -> None:
        """Send an NMI through the agent's ``diag`` action: once, logged as ``diag``, never retried."""
        if not self.has_diag:
            raise PowerError(f"{self.where}: {self.agent} has no diag action (no NMI through this device)")
        with self._outlet_held("diag"), self._logged("diag") as action:
            action.tries = 1
            action.note = f"NMI through {os.path.basename(self.path)} action=diag"
            with device_lock(self.lock_dir, self.device_key, self.settings.lock_wait_s, "diag"):
                done = self._run("diag")
            if done.returncode != 0:
                said = last_line(done)
                raise PowerError(f"{self.agent} diag exited {done.returncode}" + (f": {said}" if said else ""))
