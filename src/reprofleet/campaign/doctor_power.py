"""``invoke doctor``'s items about what happens when a host wedges: kdump readiness for the
recovery ladder's NMI rung, and the plug's own behaviour (power-on state after mains loss,
auto-off timer, power limit, child lock).

A module of its own so that doctor.py keeps the host's own readiness; these two judge the
recovery path. Pure functions of the gathered evidence, tested without hosts.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from reprofleet.campaign.doctor_items import Check, Status
from reprofleet.model import Cell, Host, RecoveryRung
from reprofleet.power.plug_behaviour import PlugReport, PlugSettings, Verdict, judge
from reprofleet.runner.plug_gate import gpu_limit_w

KDUMP_FIX = ("install kdump (apt install kdump-tools, or dnf install kexec-tools; crashkernel= on the kernel "
             "command line), then sysctl -w kernel.unknown_nmi_panic=1 (and persist it in /etc/sysctl.d/); "
             "README: Power control, An NMI before the AC cut")


Plugs = tuple[tuple[tuple[str, PlugSettings | None], ...], str | None]  # (device, settings) each, or why not


def recovery_checks(host: Host, cells: Sequence[Cell], facts: Mapping[str, Any], plugs: Plugs,
                    campaign_s: float | None) -> list[Check]:
    """The kdump item, then one item per setting of each power device's own behaviour."""
    kdump = kdump_check(host, facts)
    checks = [kdump] if kdump is not None else []
    read, error = plugs
    if error is not None:
        checks += plug_checks(None, error)
    gpu_w = gpu_limit_w(host, facts, cells)
    for device, settings in read:
        checks += plug_checks(judge(device, settings, campaign_s=campaign_s, gpu_limit_w=gpu_w), None)
    return checks


def kdump_check(host: Host, facts: Mapping[str, Any]) -> Check | None:
    """Will an NMI from the BMC become a vmcore? A warning only where the host's ladder sends one;
    None (no item) where the facts do not say and no NMI is sent."""
    kdump = facts.get("kdump")
    wanted = RecoveryRung.NMI in host.recovery
    if not isinstance(kdump, Mapping):
        return Check("kdump", Status.UNKNOWN, "the host's facts say nothing of kdump (an older agent?)",
                     KDUMP_FIX) if wanted else None
    loaded = kdump.get("crash_kernel_loaded")
    panics = [name for name in ("unknown_nmi_panic", "panic_on_unrecovered_nmi") if kdump.get(name) == 1]
    cores = [str(p) for p in kdump.get("vmcores") or ()]
    last = f"; {len(cores)} vmcore(s) under {kdump.get('crash_dir')}, newest {cores[-1]}" if cores else ""
    gaps = ([] if loaded else ["no crash kernel loaded (/sys/kernel/kexec_crash_loaded is not 1)"]) + \
           ([] if panics else ["kernel.unknown_nmi_panic and kernel.panic_on_unrecovered_nmi are both 0"])
    if not gaps:
        return Check("kdump", Status.OK, f"crash kernel loaded, {' and '.join(panics)} = 1: an NMI becomes a "
                                         f"vmcore{last}")
    if not wanted:
        return Check("kdump", Status.OK, f"not set up ({'; '.join(gaps)}), and this host's ladder sends no NMI "
                                         f"(recovery: [cycle]){last}")
    return Check("kdump", Status.WARN, f"recovery: [nmi, cycle], but {'; '.join(gaps)}: the NMI will leave no "
                                       f"vmcore and the host waits its nmi_reboot before the cycle{last}", KDUMP_FIX)


def plug_checks(report: PlugReport | None, error: str | None) -> list[Check]:
    """One item per setting of the plug's own behaviour (``plug: <setting>``)."""
    if error is not None:
        return [Check("plug settings", Status.UNKNOWN, f"could not be read: {error}",
                      "check the device by hand (its app or web page): power-on state, auto-off, power limit")]
    if report is None:
        return []
    status = {Verdict.OK: Status.OK, Verdict.RISK: Status.WARN, Verdict.UNKNOWN: Status.UNKNOWN}
    checks = []
    for setting in report.settings:
        refuses = setting.refuses
        checks.append(Check(f"plug: {setting.name}", Status.MISSING if refuses else status[setting.verdict],
                            setting.found + (" (the campaign refuses this host)" if refuses else ""), setting.advice))
    return checks
