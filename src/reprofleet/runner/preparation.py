"""Getting one host ready for its first attempt: its lease, what a dead controller left running
on it, its facts and readiness, the PoC and the starting cache pushed; and, for a host that
does not answer at the start, the checks that decide whether it may be switched on at all.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from reprofleet.errors import ConnectError, HostNotReady, PolicyError
from reprofleet.liveness.probes import ProbeAnswer
from reprofleet.model import Cell, Host
from reprofleet.model.events import CampaignEvent
from reprofleet.model.reasons import ReasonCode
from reprofleet.power.control import PowerControl
from reprofleet.records.facts_cache import cache_facts
from reprofleet.records.host_stack import software_stack, stack_changes
from reprofleet.records.host_hold import held_last, last_switch
from reprofleet.records.store import power_cycles_logged, read_log_lines, write_facts
from reprofleet.remote.replies import Facts
from reprofleet.remote.agent import AgentClient
from reprofleet.runner import cache_sync, gpu_policy as policy, readiness
from reprofleet.runner.attempt_run import PushedFiles
from reprofleet.runner.context import CampaignContext
from reprofleet.runner.host_log import HostLog
from reprofleet.runner.link import HostLink
from reprofleet.runner.plug_gate import gpu_limit_w, plug_refusals
from reprofleet.runner.recovery import PowerBudget
from reprofleet.runner.runtimes import HostRuntimes
from reprofleet.runner.slot_record import SlotRecorder
from reprofleet.runner.slurm_node import host_hold

__all__ = ["HostPreparation"]


class HostPreparation:
    """Prepares one host; answers the questions asked of a host that is silent at the start."""

    def __init__(self, ctx: CampaignContext, host: Host, link: HostLink, runtimes: HostRuntimes,
                 recorder: SlotRecorder, budget: PowerBudget, log: HostLog) -> None:
        self.ctx = ctx
        self.host = host
        self.link = link
        self.runtimes = runtimes
        self.recorder = recorder
        self.budget = budget
        self.log = log
        self.prepared = False  # this run reached the host and prepared it (so it restores it at the end)
        self.stack: dict[str, str | None] | None = None  # kernel, driver, CUDA, VBIOS as last read
        self.facts_boot: str | None = None  # the boot the facts were read in
        self.slurm = host_hold(ctx, host)  # its Slurm node, when it is one: taken before anything runs on it

    def prepare(self, cells: Sequence[Cell]) -> PushedFiles:
        """Its Slurm node taken (jobs waited for), then lease, orphans, facts, readiness, the PoC and
        the cache on the host; what was pushed."""
        if self.slurm is not None:
            self.slurm.take()
        agent = self.link.connect()
        self.link.take_lease(agent)
        self.budget.sync(self.ctx.directory, self.host.name)
        self.reconcile_orphans(agent)
        facts = self._read_facts(agent)
        self.link.note_boot(str(facts.boot_id), float(facts.uptime_s))
        missing = readiness.problems(self.host, list(cells), facts.as_json)
        if missing:
            raise HostNotReady(self.host.name, missing)
        problems = policy.check_power_limits(self.ctx.playbook, self.host, facts.as_json)
        if problems:
            raise PolicyError("; ".join(problems))
        refused = self._plug_refusals(cells, facts.as_json)
        if refused:
            raise HostNotReady(self.host.name, refused)
        name = self.ctx.playbook.poc.script.rsplit("/", 1)[-1]
        poc_digest = self.ctx.poc_digest[:12]  # a new PoC gets a new folder
        rel = agent.push_file(self.ctx.poc_script, f"poc/{poc_digest}", name)
        self.runtimes.prepare(agent, cells, self.host.python)
        cache_seed = None
        if self.ctx.cache_seed is not None:
            archive, seed_digest = self.ctx.cache_seed
            seed_rel = agent.push_file(archive, "cache-seed", f"{seed_digest}.tar.gz")
            cache_seed = f"{self.link.home}/{seed_rel}"
        cache_sync.push_for_campaign(self.ctx, agent)  # seeded cells: the snapshot, content-addressed
        self.log.event(CampaignEvent.PREPARED, agent=self.ctx.bundle.digest, poc=poc_digest,
                       boot_id=self.link.boot.boot_id)
        self.prepared = True
        return PushedFiles(f"{self.link.home}/{rel}", cache_seed)

    def _plug_refusals(self, cells: Sequence[Cell], facts: Mapping[str, Any]) -> list[str]:
        """The host's plug may not switch it off by itself during this campaign (runner/plug_gate.py)."""
        if self.ctx.power is None or not self.host.power_ports:
            return []
        campaign_s = len(cells) * self.ctx.playbook.timeouts.attempt
        power = self.link.port.power(self.ctx.power.power_log)
        return plug_refusals(power, campaign_s, gpu_limit_w(self.host, facts, cells), self.log)

    def _read_facts(self, agent: AgentClient) -> Facts:
        """The host's facts now, stored (by host and by hash); the records after carry their hash.
        A kernel, driver, CUDA or VBIOS other than the last boot's is a ``facts_changed`` event."""
        facts = agent.facts()
        self.recorder.facts_hash = write_facts(self.ctx.directory, self.host.name, dict(facts.as_json))
        cache_facts(self.ctx.directory.root.parent, self.host.name, dict(facts.as_json))
        stack = software_stack(facts.as_json, self.host.gpu_index)
        changes = stack_changes(self.stack, stack) if self.stack is not None else {}
        if changes:
            self.log.event(CampaignEvent.FACTS_CHANGED, boot_id=facts.boot_id, changes=changes,
                           facts=self.recorder.facts_hash,
                           message="the host booted into other software: records from here on carry the new facts")
        self.stack, self.facts_boot = stack, facts.boot_id
        return facts

    def before_attempt(self, agent: AgentClient) -> None:
        """Before every attempt: no Slurm job on the node (runner/slurm_node.py), facts current."""
        if self.slurm is not None:
            self.slurm.before_attempt()
        self.refresh_facts(agent)

    def refresh_facts(self, agent: AgentClient) -> None:
        """Facts after every boot the campaign sees: read again when the host is in a boot other
        than the one they were read in (a recovery's, or a reset by itself)."""
        if self.prepared and self.facts_boot is not None and self.link.boot.boot_id != self.facts_boot:
            self._read_facts(agent)

    def reconcile_orphans(self, agent: AgentClient) -> None:
        """An attempt still running on the host (a controller died under it) is killed and
        recorded as ``infra`` with the reason, or, if it is not this campaign's, only killed;
        never is a second PoC started beside it."""
        for orphan in agent.attempts(running_only=True):
            slot = self.ctx.started_slots.get(orphan.id)
            if slot is not None and not self.ctx.recorded(orphan.id) \
                    and self.ctx.started_on.get(orphan.id) == self.host.name:
                continue  # this campaign's, still running: followed from its first line and recorded
            reply = agent.kill(orphan.id)
            self.log.event(CampaignEvent.ORPHAN_KILLED, attempt=orphan.id, age_s=orphan.age_s,
                           ours=slot is not None, **reply.container_fields())
            if slot is not None and not self.ctx.recorded(orphan.id):
                cell, index = slot
                self.recorder.append(self.recorder.infra(cell, index, ReasonCode.INTERRUPTED.words(
                    "the controller died during this attempt; its orphan was killed on resume"), attempt_id=orphan.id))

    # -- a host silent at the start ----------------------------------------------------------
    def sshd_within_boot_deadline(self) -> bool:
        """A host whose kernel answers but whose sshd does not may be booting: wait for it up to
        the boot deadline (then it is a userspace wedge)."""
        return self._sshd_by(self.ctx.clock.monotonic() + self.ctx.playbook.timeouts.boot)

    def _sshd_by(self, deadline: float) -> bool:
        return self.link.sshd_by(deadline, self.ctx.stop, self.ctx.settings.timings.switched_on_poll_s)

    def back_before_switching(self) -> bool:
        """Before a silent host is switched at the start: a boot this campaign started less than a
        boot deadline ago is waited for (issue 32 item 6), and a host this campaign did not hold
        within a lease TTL gets its boot deadline to come back, so that its lease is read first
        (item 8). True: it answered."""
        own_boot = self.own_boot_answers()
        return bool(own_boot or (own_boot is None and self.answers_while_another_may_hold()))

    def own_boot_answers(self) -> bool | None:
        """A silent host whose outlet this campaign switched on (or cycled) less than a boot
        deadline ago is booting: its boot is waited for before anything else (issue 32 item 6).
        True: it booted; False: it did not within the deadline (a wedge in boot, this campaign's
        to recover); None: this campaign started no boot of it that is still in time."""
        switched = last_switch(read_log_lines(self.ctx.directory.power), self.host.name)
        boot = self.ctx.playbook.timeouts.boot
        if switched is None or switched.action == "off":
            return None
        age = self.ctx.clock.wall() - switched.at
        if not 0 <= age < boot:
            return None
        self.log.event(CampaignEvent.BOOT_AWAITED, why="switched_on_here", switched_s_ago=round(age, 1),
                       message=f"this campaign switched it {switched.action} {age:.0f} s ago: waiting for that boot "
                               f"(up to {boot - age:.0f} s) before deciding")
        return self._sshd_by(self.ctx.clock.monotonic() + boot - age)

    def answers_while_another_may_hold(self) -> bool:
        """Never switch a host another campaign may hold (issue 32 item 8). A silent host's lease
        cannot be read; only when this campaign held it less than a lease TTL ago can no other
        hold it. Otherwise its boot deadline is waited first (a holder that is recovering it
        brings it back within it): True when it answered (its lease then decides), False when
        it stayed silent (or this campaign held it recently: nothing to wait for)."""
        held = held_last(read_log_lines(self.ctx.directory.events), read_log_lines(self.ctx.directory.power),
                         self.host.name)
        ttl = self.ctx.lease_ttl_s
        if held is not None and 0 <= self.ctx.clock.wall() - held < ttl:
            return False
        boot = self.ctx.playbook.timeouts.boot
        since = "never" if held is None else f"{self.ctx.clock.wall() - held:.0f} s ago"
        self.log.event(CampaignEvent.BOOT_AWAITED, why="may_be_held", held_s_ago=None if held is None
                       else round(self.ctx.clock.wall() - held, 1), lease_ttl_s=ttl,
                       message=f"this campaign last held it {since} (a lease lasts {ttl:.0f} s): another campaign may "
                               f"hold it, so its lease is read before any switch; waiting up to {boot:g} s for it")
        return self._sshd_by(self.ctx.clock.monotonic() + boot)

    def seen_alive(self) -> bool:
        """Whether this campaign has seen the host answer (it prepared it, or recorded an
        attempt of it), or the user said --bring-up: only then may it cut the host's power."""
        return self.ctx.settings.bring_up or self.host.name in self.ctx.seen_alive

    def never_answered(self, detail: str = "") -> str:
        return (f"never answered at {self.host.address}:{self.host.port} in this campaign"
                + (f" ({detail})" if detail else "") + ": not switched (a mistyped address would switch someone "
                f"else's machine); check the address, or `invoke power {self.host.name} on`, or pass --bring-up")

    def switch_on_if_off(self, power: PowerControl) -> bool:
        """An outlet that reads off explains the silence for certain (a controller died mid-cycle):
        it is switched on, with no partition guard to consult, and the boot awaited. False when
        every outlet reads on (the host is frozen, not off)."""
        from reprofleet.power.base import PowerState
        from reprofleet.power.ports import switch_on_until

        drivers = self.link.port.power(power.power_log)
        off = [driver for driver in drivers.drivers if driver.status() is PowerState.OFF]
        if not off:
            return False
        if not self.seen_alive() and not power_cycles_logged(self.ctx.directory.power, self.host.name):
            raise ConnectError(self.host.name, self.never_answered(f"its outlet {off[0].outlet_key} reads off"))
        # every supply on (the ones that read on stay as they are), each retried on its own
        switch_on_until(drivers, self.ctx.settings.timings.power_on_deadline_s, self.ctx.clock)
        self.log.event(CampaignEvent.SWITCHED_ON_AT_START, outlets=[d.outlet_key for d in off])
        if self._sshd_by(self.ctx.clock.monotonic() + self.ctx.playbook.timeouts.boot):
            return True
        raise ConnectError(self.host.name, f"switched on at campaign start, but did not answer within "
                                           f"{self.ctx.playbook.timeouts.boot:g} s")
