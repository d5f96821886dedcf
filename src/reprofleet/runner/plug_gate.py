"""Before a host's first attempt: does its plug's own behaviour let a campaign run? (issue 35 item 3)

Each of the host's power devices is asked for its own settings (power/plug_behaviour.py) and
judged against this campaign on this host: its expected length (the planned attempts, each up
to ``timeouts.attempt``) and the highest power limit its GPU will run at (the card's enforced
limit from its facts, or a cell's higher ``power_limit``). A plug that stays off after mains
loss, an armed auto-off shorter than the campaign, or a power limit below the GPU's refuses the
host, one line each with the fix; every other risk is a warning event. A device that could not
be read refuses nothing: its settings are unknown, and ``invoke doctor`` says what to check.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from reprofleet.errors import ReprofleetError
from reprofleet.model import Cell, Host
from reprofleet.model.events import CampaignEvent
from reprofleet.power.plug_behaviour import PlugReport, Verdict, judge
from reprofleet.power.ports import HostPower
from reprofleet.runner.host_log import HostLog


def gpu_limit_w(host: Host, facts: Mapping[str, Any], cells: Sequence[Cell]) -> float | None:
    """The most the host's GPU will draw under this plan: its enforced limit (facts) or a cell's higher one."""
    limits = [float(c.gpu.power_limit_w) for c in cells if c.gpu.power_limit_w]
    for gpu in facts.get("gpus") or ():
        if isinstance(gpu, Mapping) and gpu.get("index") == host.gpu_index:
            limit = gpu.get("power_limit_w")
            found = limit.get("enforced") or limit.get("current") or limit.get("default") \
                if isinstance(limit, Mapping) else None
            if isinstance(found, (int, float)) and not isinstance(found, bool):
                limits.append(float(found))
    return max(limits) if limits else None


def plug_reports(power: HostPower, campaign_s: float, gpu_w: float | None, log: HostLog) -> list[PlugReport]:
    """Every device of the host judged; a device that cannot be read is judged on nothing (unknown)."""
    reports = []
    for driver in power.drivers:
        try:
            settings = driver.plug_settings()
        except ReprofleetError as exc:
            log.event(CampaignEvent.WARNING, message=f"{driver.where}: its own settings could not be read ({exc}): "
                                                     "check its power-on state and timers by hand (invoke doctor)")
            settings = None
        reports.append(judge(driver.where, settings, campaign_s=campaign_s, gpu_limit_w=gpu_w))
    return reports


def plug_refusals(power: HostPower, campaign_s: float, gpu_w: float | None, log: HostLog) -> list[str]:
    """The one-line refusals of the host's devices; the other risks become warning events."""
    refusals = []
    for report in plug_reports(power, campaign_s, gpu_w, log):
        for setting in report.settings:
            if setting.verdict is Verdict.RISK and not setting.refuses:
                log.event(CampaignEvent.WARNING, message=f"{report.device}: {setting.name}: {setting.found}; "
                                                         f"fix: {setting.advice}")
        if report.refusal is not None:
            refusals.append(report.refusal)
    return refusals
