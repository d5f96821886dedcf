"""``scontrol reboot`` as a power cycle: whether the cluster allows it, and the exact command.

A hard-locked node cannot run anything, its own RebootProgram included: by default slurmd on
the node runs it, so ``scontrol reboot`` cannot revive a wedged host. Only with
``SlurmctldParameters=reboot_from_controller`` does slurmctld run ``RebootProgram`` itself,
with the node list as its first argument (slurm.conf(5), 22.05), and that program (an IPMI or
PDU call of the lab's own) can cycle a frozen machine. So the cluster allows a cycle through
Slurm only when both are set; ``tests/fixtures/slurm/config_plain.json`` and
``config_reboot_from_controller.json`` are a real 22.05's ``scontrol show config`` without and
with them.

The command (scontrol(1), 22.05): ``reboot ASAP nextstate=DOWN reason=<reason> <node>``.
``ASAP`` drains the node so no job lands before the reboot; ``nextstate=DOWN`` keeps it down
after the reboot (the campaign, not Slurm, decides when it is healthy: its health gate drains it
again); Slurm appends `` : reboot issued`` and then `` : reboot complete`` to the reason
(``sinfo_reboot_issued.json``, ``sinfo_reboot_complete.json``), so a reason that starts with the
campaign's prefix stays the campaign's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

__all__ = ["RebootSupport", "reboot_argv", "reboot_support"]

UNSET = ("", "(null)")


@dataclass(frozen=True)
class RebootSupport:
    """Whether ``scontrol reboot`` can cycle a hard-locked node here, and if not, what to change."""

    allowed: bool
    program: str
    why_not: str = ""


def reboot_support(config: Mapping[str, str]) -> RebootSupport:
    """From ``scontrol show config``'s ``Key = Value`` pairs (client.parse_config)."""
    parameters = [word.strip() for word in config.get("SlurmctldParameters", "").split(",")]
    program = config.get("RebootProgram", "").strip()
    missing = []
    if "reboot_from_controller" not in parameters:
        missing.append("SlurmctldParameters=reboot_from_controller (without it slurmd on the node runs "
                       "RebootProgram, and a hard-locked node runs nothing)")
    if program in UNSET:
        missing.append("RebootProgram=<a program slurmctld runs with the node list, e.g. an IPMI or PDU call>")
    if missing:
        return RebootSupport(False, "" if program in UNSET else program,
                             "slurm.conf needs " + " and ".join(missing) + ", then `scontrol reconfigure`")
    return RebootSupport(True, program)


def reboot_argv(node: str, reason: str) -> tuple[str, ...]:
    """The cycle of one node through Slurm: drained now (ASAP), down after the reboot, our reason."""
    return ("scontrol", "reboot", "ASAP", "nextstate=DOWN", f"reason={reason}", node)
