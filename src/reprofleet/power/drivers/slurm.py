"""A host power-cycled through the lab's Slurm: ``scontrol reboot``, where the lab set
``SlurmctldParameters=reboot_from_controller``.

Selected by an inventory ``pdu:`` block (a host's, or a group's: ``all:`` in the inventory
given with ``-i slurm:PARTITION`` makes every node of the partition cycle through Slurm)::

    pdu:
      driver: slurm
      # node: gpu01       # the Slurm node; default: the host's name (what -i slurm: names it)
      # timeout_s: 15     # scontrol's answer (slurmctld answers in milliseconds)

No address: the cluster is the one ``scontrol`` finds (``SLURM_CONF``, /etc/slurm/slurm.conf).

Only a cycle: slurmctld runs the lab's ``RebootProgram`` with the node's name (an IPMI or PDU
call of the lab's own), so there is no off and no on of our own, and nothing reads the outlet
back: ``status`` is UNKNOWN, the cycle's power log entries say "unverified", and the new boot is
proven, as for any cycle, by the host's new boot_id. ``off``/``on`` alone are refused.

The cluster must allow it (scheduler/reboot.py): without ``reboot_from_controller`` slurmd on
the node runs RebootProgram, and a hard-locked node runs nothing. The campaign refuses such a
host before anything runs (``slurm_power_problems``), and a cycle asked anyway is refused with
the same line.

The reason: the node's own when it has one (the campaign set it down with its wedge reason a
moment before, ``reprofleet:<campaign> wedge in ...``; someone else's stays theirs, so the
campaign never gives back a node they took), cut before Slurm's own `` : reboot ...`` notes
(Slurm appends `` : reboot issued`` and `` : reboot complete``); a node without one (a cycle by
hand) gets ``reprofleet: power cycle of <host> through scontrol reboot``.
"""

from __future__ import annotations

from reprofleet.credentials import Secret
from reprofleet.errors import PowerError, SchedulerError
from reprofleet.model import PowerPort
from reprofleet.power.base import CycleCallback, DeviceCycle, DriverSettings, PowerDriver, PowerState
from reprofleet.power.log import PowerLog
from reprofleet.power.options import PowerConfigError
from reprofleet.scheduler import REASON_PREFIX, RebootSupport, SlurmClient

__all__ = ["SlurmRebootDriver", "reboot_reason"]

SLURM_NOTE = " : reboot"  # where Slurm's own notes begin in a reason (" : reboot issued", " : reboot complete")


def reboot_reason(current: str, host: str) -> str:
    """The reason the reboot carries: the node's own (Slurm's notes cut), else ours for a cycle by hand."""
    own = current.split(SLURM_NOTE, 1)[0].strip()
    return own or f"{REASON_PREFIX} power cycle of {host} through scontrol reboot"


class SlurmRebootDriver(PowerDriver):
    name = "slurm"
    option_names = ("node", "device_cycle")
    defaults = DriverSettings(timeout_s=15.0, tries=1)
    reads_state = False

    def __init__(self, port: PowerPort, host: str, log: PowerLog, *, secret: Secret | None = None) -> None:
        super().__init__(port, host, log, secret=secret)
        self.node = self.options.text("node") or host
        self.device_cycles = self._device_cycle_option(True)
        if not self.device_cycles:
            raise PowerConfigError(f"{self.where}: pdu option device_cycle: false leaves nothing: Slurm has no "
                                   "off/on of its own, only scontrol reboot", field="device_cycle")
        self.client = SlurmClient(timeout_s=self.settings.timeout_s)  # tests give it a fake Slurm's runner

    def _outlet_id(self) -> str:
        return self.node

    def support(self) -> RebootSupport:
        """What ``scontrol show config`` says about rebooting from the controller."""
        try:
            return self.client.reboot_support()
        except SchedulerError as exc:
            raise PowerError(f"cannot read Slurm's configuration: {exc}") from None

    def _set(self, state: PowerState) -> None:
        raise PowerError(f"Slurm has no power {state.value} of its own: scontrol reboot only cycles node "
                         f"{self.node} (a pdu or BMC driver switches off and on)")

    def _read(self) -> PowerState:
        return PowerState.UNKNOWN

    def cycle(self, dwell_s: float, on_state: CycleCallback | None = None, *, device: bool = True) -> PowerState:
        """Slurm's reboot, always (``device`` or not: there is no off, dwell, on to fall back to);
        a cluster that does not allow it is refused with its fix, nothing sent."""
        tell = on_state or (lambda state: None)
        with self._outlet_held("cycle"), self._logged("cycle") as action:
            plan = self._plan_device_cycle(max(0.0, dwell_s))
            assert plan is not None  # this driver's plan is Slurm's reboot or an error
            return self._cycle_on_device(plan, max(0.0, dwell_s), action, tell)

    def _plan_device_cycle(self, dwell_s: float) -> DeviceCycle:
        support = self._ask("scontrol show config", self.support)
        if not support.allowed:
            raise PowerError(f"scontrol reboot cannot cycle a hard-locked {self.node}: {support.why_not}")
        return DeviceCycle(off_s=None, visible=False,
                           note=f"scontrol reboot ASAP nextstate=DOWN {self.node}: slurmctld runs {support.program}")

    def _start_device_cycle(self, plan: DeviceCycle) -> None:
        try:
            reason = reboot_reason(self.client.node(self.node).reason, self.host)
            self.client.reboot(self.node, reason)
        except SchedulerError as exc:  # never retried: a second reboot could land in the first one's boot
            raise PowerError(str(exc)) from None
