"""An in-process fake host for seam tests: the runner's decisions in virtual time.

A :class:`FakeHost` answers a host runner through the host seam (``runner.port.HostPort``)
from a script: the outcome of each attempt (``clean``, ``error``, ``hang``, ``wedge``,
``reboot``, ``orderly_reboot``: systemd reboots it for someone, ``orderly_stop``: the same,
seen by the agent: the attempt's exit says ``stopped_by: host_shutdown`` while the host stays up
in that boot for ``stopping_s`` (systemd stopping its units; whatever starts then is stopped at
its end too) before it reboots, ``freeze-after``: frozen after
the attempt ended), what a probe finds, the
outlet that feeds it and how its power device fails. Its state is a function of the
:class:`VirtualClock` (a boot that takes 3 s is up 3 virtual seconds after power came
back), so a scenario that takes minutes on the simulated fleet plays in milliseconds and
the same way every time. Everything the runner writes (attempts.jsonl, events.jsonl,
power.jsonl, streams) is the real code's output.
"""

from __future__ import annotations

import itertools
import json
import shlex
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from reprofleet.remote import replies
from reprofleet.clock import VirtualClock
from reprofleet.config import Timings
from reprofleet.errors import AgentError, AgentFenced, ConnectError, PowerError
from reprofleet.liveness.probes import ProbeAnswer
from reprofleet.liveness.watchdog import FleetLiveness
from reprofleet.model import Cell, EventKind, Host, Playbook, PowerPort
from reprofleet.power.base import PowerDriver, PowerState, TransientPowerError
from reprofleet.power.log import PowerLog
from reprofleet.power.plug_behaviour import PlugSettings
from reprofleet.power.ports import HostPower
from reprofleet.power.wall import WallLine, WallPowerSampler
from reprofleet.records.store import AttemptLog, CampaignDir, JsonlAppender, read_records
from reprofleet.remote.agent import AgentBundle, StreamEvent, parse_event
from reprofleet.remote.transport import CommandResult, TransportSettings
from reprofleet.runner.context import CampaignContext, RunSettings
from reprofleet.runner.host import HostRunner
from reprofleet.remote import host_commands
from reprofleet.runner.recovery import announce_power_control, recovery_factory
from reprofleet.sim.rfsim.kernel_panic import SYSCTL_DEFAULTS

POC_BYTES = b"print('the reproducer')\n"
LINE_GAP_S = 0.1  # virtual time between two lines of a live attempt
PHASES = ("model_load", "torch_compile", "kv_cache", "cuda_graph_capture")


@dataclass
class Device:
    """The fake power device: what it does when asked, and what it says."""

    dead: bool = False  # never answers (every request a transient failure)
    feeds_host: bool = True  # False: the inventory names the wrong outlet
    lose_off_readbacks: int = 0  # the next N reads after an "off" are lost (no reply)
    lose_ons: int = 0  # the next N "on" requests are lost (no reply; the outlet stays off)
    lose_on_readbacks: int = 0  # the next N reads while on are lost (a BMC slow to answer after power-on)
    state: PowerState = PowerState.ON
    requests: list[str] = field(default_factory=list)
    before_set: Callable[[PowerState], None] | None = None  # a test's hook as each switch request arrives
    sends_nmi: bool = False  # a BMC that takes "chassis power diag" (the recovery ladder's nmi rung)
    refuses_nmi: bool = False  # ... but answers it with an error (a BMC without the command)
    plug: PlugSettings | None = None  # what the device reports of its own behaviour (None: nothing)


class FakeHost:
    """One scripted host; thread-safe (the watchdog probes it from its own threads)."""

    def __init__(self, clock: VirtualClock, name: str = "h1", script: Sequence[str] = ("clean",), *,
                 power: bool = True, boot_delay_s: float = 3.0, self_reset_s: float = 8.0,
                 device: Device | None = None, rescued_after_s: float | None = None,
                 image: str = "sha256:img-1",
                 pdu_options: Mapping[str, Any] | None = None, gpu_falls_off: bool = False) -> None:
        self.clock = clock
        self.name = name
        self.script = list(script)
        self.boot_delay_s = boot_delay_s
        self.self_reset_s = self_reset_s
        self.device = device or Device()
        self.rescued_after_s = rescued_after_s  # no port: a person power-cycles it this long after it froze
        self.image = image  # the image id the docker tag names on this host now (a test may move it)
        self._lock = threading.RLock()
        self._boots = itertools.count(1)
        self.boot_id = self._new_boot_id()
        self.boot_ids = [self.boot_id]
        self.up_at: float | None = clock.monotonic() - 600.0  # up since 10 min before the test
        self.frozen_at: float | None = None
        self.userspace_only = False  # a freeze_userspace(): its kernel still answers probes
        self.off = False
        self.shut_down_by: dict[str, str] = {}  # boot_id -> who shut that boot down in an orderly way
        self.stopping_s = 20.0  # orderly_stop: how long the boot stays up, stopping, after the attempt's exit
        self.stopping_until: float | None = None  # the stopping boot reboots then
        self.attempts_run = 0
        self.phases: tuple[str, ...] = PHASES  # what each attempt's engine start prints, in order
        self.postboot_asked: list[str | None] = []  # the boot each postboot asked about
        self.orphans: list[dict[str, Any]] = []  # attempts still running under the agent
        self.killed: list[str] = []
        self.attaches: list[float] = []  # when each re-attach was tried (virtual time)
        self.facts: dict[str, Any] = {}
        self.facts_next_boot: dict[str, Any] = {}  # facts that change with the next boot (a driver upgrade)  # facts beyond the minimum (nvml, nvidia_smi, docker ...), as the agent sends them
        self.policy_broken: str | None = None  # every policy apply fails with these words
        self.refused: list[str] = []  # attempt ids whose start the agent refused (another was alive)
        self.finished: dict[str, str] = {}  # a dead controller's attempts that ended since: id -> scripted outcome
        self.lost: dict[str, str] = {}  # ... and those a reset of the host ended: id -> the boot they ran in
        self.lease_holder: dict[str, Any] | None = None
        self.policy: dict[str, Any] = {}
        self.policy_calls: list[str] = []
        self.host_debug: dict[str, int] = dict(SYSCTL_DEFAULTS)  # the kernel's lockup sysctls
        self.host_debug_applies: list[str] = []  # the boot_id of each apply
        self.started: dict[str, str] = {}  # attempt id -> the boot it started in
        self.containers: dict[str, str | None] = {}  # attempt id -> the container name its run gave the agent
        self.runs: dict[str, tuple[list[str], dict[str, str], dict[str, Any]]] = {}  # id -> argv, env, secrets
        self.drop_connects = 0  # the next N connections fail although the host is up
        self.gpu_falls_off = gpu_falls_off  # a freeze takes the GPU off the bus, for good (no cycle brings it back)
        self.gpu_lost = False
        self.health_calls: list[dict[str, Any]] = []  # what each `health` was asked
        self.health_fails: str | None = None  # `health` does not complete (NVML hung on a stuck card): these words
        self.panics_on_nmi = False  # kernel.unknown_nmi_panic=1: an NMI panics it, kdump writes a vmcore, it reboots
        self.nmis: list[float] = []  # when each NMI arrived (virtual time)
        options = {"timeout_s": 1, "tries": 2} if pdu_options is None else dict(pdu_options)
        port = PowerPort("fake", "http://pdu.fake", outlet="1", options=options) if power else None
        self.host = Host(name=name, address="192.0.2.10", pdu=port)

    # -- state, as a function of the clock --------------------------------------------
    def _new_boot_id(self) -> str:
        return f"boot-{self.name}-{next(self._boots)}"

    def _settle(self) -> None:
        """Apply what time did: a scheduled rescue, a self-reset's return, a boot finishing."""
        now = self.clock.monotonic()
        if self.stopping_until is not None and now >= self.stopping_until:
            self.stopping_until = None
            self._boot(now)  # systemd-shutdown's reboot: down for the boot delay, a new boot_id
        if self.frozen_at is not None and self.host.pdu is None and self.rescued_after_s is not None \
                and now >= self.frozen_at + self.rescued_after_s:
            self._boot(self.frozen_at + self.rescued_after_s)

    def _boot(self, at: float) -> None:
        self.facts.update(self.facts_next_boot)  # an upgrade that lands with this boot (unattended-upgrades)
        self.facts_next_boot = {}
        self.frozen_at = None
        self.userspace_only = False
        self.off = False
        self.boot_id = self._new_boot_id()
        self.boot_ids.append(self.boot_id)
        self.up_at = at + self.boot_delay_s
        self.policy = {}  # a driver reload forgets clocks and limits
        self.host_debug = dict(SYSCTL_DEFAULTS)  # and a boot the sysctls
        for orphan in self.orphans:
            orphan["lost"] = True
        self.orphans = []

    @property
    def stopping(self) -> bool:
        """An orderly shutdown is under way in this boot (``systemctl is-system-running``: stopping)."""
        with self._lock:
            self._settle()
            return self.stopping_until is not None

    def begin_stopping(self) -> None:
        with self._lock:
            self.shut_down_by[self.boot_id] = "unattended-upgrades (its automatic reboot after an upgrade)"
            self.stopping_until = self.clock.monotonic() + self.stopping_s

    @property
    def up(self) -> bool:
        with self._lock:
            self._settle()
            return (not self.off and self.frozen_at is None and self.up_at is not None
                    and self.clock.monotonic() >= self.up_at)

    def freeze(self) -> None:
        with self._lock:
            self.frozen_at = self.clock.monotonic()
            self.gpu_lost = self.gpu_lost or self.gpu_falls_off

    def reset_itself(self) -> None:
        """A watchdog reset or a panic: silent now, back by itself with a new boot."""
        with self._lock:
            self._boot(self.clock.monotonic() + self.self_reset_s - self.boot_delay_s)
            self.up_at = self.clock.monotonic() + self.self_reset_s

    def freeze_userspace(self) -> None:
        """Userspace is gone (sshd with it) while the kernel still answers pings and handshakes."""
        with self._lock:
            self.frozen_at = self.clock.monotonic()
            self.userspace_only = True

    def lose_power(self) -> None:
        """The outlet switches off by itself (the plug's own timer, an overload trip, someone's app):
        the device reads off and the host goes dark, with no request of this controller."""
        with self._lock:
            self.device.state = PowerState.OFF
            self.off, self.frozen_at, self.up_at = True, None, None

    def nmi(self) -> None:
        """An NMI from its BMC: a frozen kernel set to panic on it reboots by itself (kdump's reboot);
        one that is not stays frozen."""
        with self._lock:
            self.nmis.append(self.clock.monotonic())
            if self.panics_on_nmi and not self.off:
                self._boot(self.clock.monotonic() + self.self_reset_s - self.boot_delay_s)
                self.up_at = self.clock.monotonic() + self.self_reset_s

    def switched(self, state: PowerState) -> None:
        """The outlet that feeds it switched (only when the inventory names the right one)."""
        with self._lock:
            if not self.device.feeds_host:
                return
            if state is PowerState.OFF:
                self.off, self.frozen_at, self.up_at = True, None, None
            elif self.off:
                self._boot(self.clock.monotonic())

    # -- the seam ---------------------------------------------------------------------
    def port(self, ctx: CampaignContext) -> "FakePort":
        return FakePort(self, ctx)

    def probe(self) -> ProbeAnswer:
        if self.up:
            return ProbeAnswer.SSHD
        with self._lock:
            kernel = self.userspace_only and self.frozen_at is not None
        return ProbeAnswer.KERNEL if kernel else ProbeAnswer.DEAD

    def require_up(self) -> None:
        if not self.up:
            raise ConnectError(self.name, "timed out (the fake host does not answer)")
        with self._lock:
            if self.drop_connects > 0:  # up, but this session drops (sshd restarting late in the boot)
                self.drop_connects -= 1
                raise ConnectError(self.name, "Connection reset by peer (the fake host's sshd restarted)")

    def next_outcome(self) -> str:
        with self._lock:
            index = self.attempts_run
            self.attempts_run += 1
            return self.script[index] if index < len(self.script) else "clean"

    def image_now(self) -> str:
        return self.image


class FakeOutlet(PowerDriver):
    """The fake host's outlet through the real driver base: retries, read-back and log are real."""

    name = "fake"
    option_names = ()

    def __init__(self, port: PowerPort, fake: FakeHost, log: PowerLog) -> None:
        super().__init__(port, fake.name, log)
        self.fake = fake
        self.clock = fake.clock
        self.sends_nmi = fake.device.sends_nmi

    def _read_plug_settings(self) -> PlugSettings | None:
        self.fake.device.requests.append("read settings")
        return self.fake.device.plug

    def _send_nmi(self) -> str:
        self.fake.device.requests.append("nmi")
        if self.fake.device.refuses_nmi:
            raise PowerError("completion code 0xc1 (the BMC has no pulse diagnostic interrupt)")
        self.fake.nmi()
        return "the fake BMC's diagnostic interrupt"

    def _set(self, state: PowerState) -> None:
        device = self.fake.device
        if device.before_set is not None:
            device.before_set(state)
        device.requests.append(f"set {state.value}")
        if state is PowerState.ON and device.lose_ons > 0:
            device.lose_ons -= 1
            self.clock.sleep(self.settings.timeout_s)
            raise TransientPowerError("the request was lost")
        if device.dead:
            self.clock.sleep(self.settings.timeout_s)
            raise TransientPowerError("no answer within the request timeout")
        device.state = state
        self.fake.switched(state)

    def _read(self) -> PowerState:
        device = self.fake.device
        device.requests.append("read")
        if device.dead:
            self.clock.sleep(self.settings.timeout_s)
            raise TransientPowerError("no answer within the request timeout")
        if device.state is PowerState.ON and device.lose_on_readbacks > 0:
            device.lose_on_readbacks -= 1
            self.clock.sleep(self.settings.timeout_s)
            raise TransientPowerError("the BMC did not answer (busy after power-on)")
        if device.state is PowerState.OFF and device.lose_off_readbacks > 0:
            device.lose_off_readbacks -= 1
            self.clock.sleep(self.settings.timeout_s)
            raise TransientPowerError("the reply was lost")
        return device.state


class FakePort:
    """``HostPort`` for a fake host."""

    def __init__(self, fake: FakeHost, ctx: CampaignContext) -> None:
        self.fake = fake
        self.ctx = ctx

    def connect(self) -> "FakeAgent":
        self.fake.require_up()
        return FakeAgent(self.fake, self.ctx)

    def probe(self, timeout_s: float) -> ProbeAnswer:
        return self.fake.probe()

    def banner(self, timeout_s: float) -> bool:
        return self.fake.up

    def power(self, log: PowerLog) -> HostPower:
        if self.fake.host.pdu is None:
            raise KeyError(self.fake.name)
        return HostPower(self.fake.name, (FakeOutlet(self.fake.host.pdu, self.fake, log),))

    def wall_sampler(self, write: Callable[[WallLine], None]) -> WallPowerSampler:
        return WallPowerSampler((), write)


class FakeSession:
    """The few shell commands the runner sends, answered from the fake host's state."""

    def __init__(self, fake: FakeHost) -> None:
        self.fake = fake
        self.host = fake.host
        self._boot = fake.boot_id
        self.closed = False

    @property
    def alive(self) -> bool:
        return not self.closed and self.fake.up and self.fake.boot_id == self._boot

    def close(self) -> None:
        self.closed = True

    def run(self, command: str, timeout: float = 60.0) -> CommandResult:
        """Exactly the commands of ``remote/host_commands.py``; any other fails the test (a
        BaseException, so no ``except Exception`` of the runner turns it into an infra record)."""
        self.fake.require_up()
        fake = self.fake
        if command == host_commands.home_folder().command:
            out = "/home/fake"
        elif command == host_commands.boot_now().command:
            uptime = fake.clock.monotonic() - (fake.up_at or 0.0)
            out = f"{fake.boot_id}\n{uptime:.1f}\n"
        elif command == host_commands.boots_listed().command:
            out = "IDX BOOT ID FIRST ENTRY LAST ENTRY\n" + "".join(
                f"{i - len(fake.boot_ids) + 1} {b.replace('-', '')} x y\n" for i, b in enumerate(fake.boot_ids))
        elif command.startswith("docker image inspect") and command in (
                host_commands.image_digests(_tag_of(command)).command,):
            out = json.dumps([f"vllm/vllm-openai@{fake.image_now().replace('sha256:img', 'sha256:digest')}"])
        elif command.startswith("docker image inspect") and command == host_commands.image_id(_tag_of(command)).command:
            out = fake.image_now()
        elif command.startswith("mkdir -p ") or " && find . -mindepth 1 " in command:
            out = ""  # prepare_cache / cache_manifest: nothing to say on a fake host
        else:
            raise UnknownHostCommand(f"the runner sent a command the seam does not know: {command!r}")
        return CommandResult(command, 0, out, "")


class UnknownHostCommand(BaseException):
    """A command outside remote/host_commands.py reached the fake host: a test must fail."""


def _tag_of(command: str) -> str:
    """The image tag a ``docker image inspect`` command names (its last word, shell-unquoted)."""
    return shlex.split(command)[-1]


class FakeAgent:
    """``AgentClient``'s calls, answered by the fake host: the one fake agent of the tests.

    ``FakeAgent(fake, ctx)`` is what :class:`FakePort` connects to: every call is answered from
    the :class:`FakeHost`'s state, in virtual time. Without a fake host, ``FakeAgent(host=...,
    session=..., ok=..., fail=...)`` is the agent a unit test hands one of the runner's per-host
    helpers (tests/unit/test_host_helpers.py, test_runtime_truth.py): ``session`` is the one
    given (a ``docker image inspect`` that answers from a dict, say), and ``host_debug`` and
    ``netconsole`` answer as the agent would, applied (``ok``), refused with the agent's error
    (``ok=False``), or, for netconsole, not reached at all (``fail=True``: an ``AgentError``).
    Either way, every ``host_debug`` and ``netconsole`` call is kept in ``calls``; any other call
    needs the fake host.
    """

    def __init__(self, fake: FakeHost | None = None, ctx: CampaignContext | None = None, *, host: str = "ws01",
                 session: Any = None, ok: bool = True, fail: bool = False) -> None:
        self.fake = fake
        self.ctx = ctx
        self.session = FakeSession(fake) if fake is not None else session
        self.host = fake.name if fake is not None else host
        self.lease_token: str | None = None  # set by the runner, as on AgentClient
        self.ignore_lease = False
        self.ok, self.fail = ok, fail  # the helpers' answers, without a fake host
        self.calls: list[list[str]] = []  # every host_debug and netconsole call, with its arguments

    def _call(self) -> None:
        self.fake.require_up()

    def _live_holder(self) -> dict[str, Any] | None:
        """The lease as collectors/host_lease.py judges it: live while renewed within its TTL."""
        holder = self.fake.lease_holder
        if holder is None or not holder.get("token"):
            return None
        if self.fake.clock.monotonic() - float(holder.get("renewed", 0.0)) > float(holder.get("ttl_s", 3600.0)):
            return None
        return holder

    def _fence(self) -> None:
        """The agent's check on every call that changes the host (host_lease.check)."""
        holder = self.fake.lease_holder
        if self.lease_token and (holder is None or holder.get("token") != self.lease_token):
            raise AgentFenced(self.host, "this controller's lease was taken over by "
                                         f"{(holder or {}).get('controller', 'another controller')}")

    def push(self) -> None:
        self._call()

    def push_file(self, content: bytes, remote_rel_dir: str, name: str) -> str:
        self._call()
        return f"{remote_rel_dir}/{name}"

    def facts(self) -> replies.Facts:
        self._call()
        uptime = self.fake.clock.monotonic() - (self.fake.up_at or 0.0)
        return replies.parse_facts(self.host, {"k": "facts", "hostname": self.fake.name, "boot_id": self.fake.boot_id,
                                               "uptime_s": uptime, "gpus": [], **self.fake.facts})

    def lease(self, action: str, *, controller: str = "", campaign: str = "", pid: int = 0,
              break_lease: bool = False, ttl_s: float | None = None) -> replies.LeaseReply:
        return replies.parse_lease(self.host, {"k": "lease", **self._lease(action, controller, campaign, break_lease,
                                                                           ttl_s or 3600.0)})

    def _lease(self, action: str, controller: str, campaign: str, break_lease: bool,
               ttl_s: float = 3600.0) -> dict[str, Any]:
        self._call()
        holder = self._live_holder()
        if action == "release":
            if holder is None or holder["token"] == self.lease_token:
                self.fake.lease_holder = None
            return {"ok": True}
        mine = {"campaign": campaign, "controller": controller, "pid": 4321, "token": self.lease_token,
                "renewed": self.fake.clock.monotonic(), "ttl_s": ttl_s}
        if holder is not None and holder["token"] != self.lease_token:
            public = {k: v for k, v in holder.items() if k != "token"}
            if not break_lease:
                owner = f"{holder['controller']} (campaign {holder['campaign']}, pid {holder.get('pid', 0)}, 0 s ago)"
                return {"ok": False, "held": public, "error": f"host is leased to {owner}; pass --break-lease to take it"}
            self.fake.lease_holder = mine
            return {"ok": True, "broken": public}
        self.fake.lease_holder = mine
        return {"ok": True}

    def attempts(self, running_only: bool = False) -> tuple[replies.AttemptListing, ...]:
        self._call()
        listed = [{"status": "running", **o} for o in self.fake.orphans]
        if not running_only:  # what a dead controller's attempts left: an exit file, or a boot that ended them
            listed += [{"id": i, "status": "exited", "boot_id": self.fake.boot_id} for i in self.fake.finished]
            listed += [{"id": i, "status": "lost", "boot_id": b} for i, b in self.fake.lost.items()]
        return replies.parse_attempts(self.host, {"k": "attempts", "attempts": listed})

    def kill(self, attempt_id: str) -> replies.KillReply:
        self._call()
        self._fence()
        self.fake.killed.append(attempt_id)
        orphan = next((o for o in self.fake.orphans if o["id"] == attempt_id), None)
        if not (orphan and orphan.get("undying")):  # one stuck in the driver (D state) outlives SIGKILL
            self.fake.orphans = [o for o in self.fake.orphans if o["id"] != attempt_id]
        reply = {"k": "killed", "id": attempt_id, "was_running": orphan is not None}
        if orphan is not None and orphan.get("container"):  # the agent docker-kills a container left running
            reply.update(container=orphan["container"], container_killed=True)
        return replies.parse_kill(self.host, reply)

    def policy(self, action: str, gpu: int, settings: Mapping[str, Any] | None = None) -> replies.PolicyReply:
        self._call()
        if action != "read":
            self._fence()
        self.fake.policy_calls.append(action)
        if self.fake.policy_broken and action == "apply":  # e.g. the driver's utilities were removed mid-campaign
            return replies.parse_policy(self.host, {"k": "policy", "ok": False, "errors": [self.fake.policy_broken],
                                                    "readback": dict(self.fake.policy)})
        if action == "apply":
            self.fake.policy = dict(settings or {})
        elif action == "restore":
            self.fake.policy = {}
        readback = dict(self.fake.policy)
        for lock in ("graphics_clocks", "memory_clocks"):  # the agent's second read of a lock agrees
            if lock in readback and f"{lock}_freqs" not in readback:
                readback[f"{lock}_freqs"] = readback[lock]
        return replies.parse_policy(self.host, {"k": "policy", "ok": True, "readback": readback})

    def one(self, args: list[str], kind: str, timeout: float = 60.0) -> dict[str, Any]:
        self._call()
        if args[:2] == ["runtime", "image"]:
            image = json.loads(args[3])["image"]
            return {"ok": True, "image": image, "id": self.fake.image_now(),
                    "repo_digests": [f"{image.rsplit(':', 1)[0]}@{self.fake.image_now().replace('img', 'digest')}"]}
        if args[:2] == ["runtime", "python"]:
            return {"ok": True, "interpreter": {"path": "/usr/bin/python3", "version": "3.11"}, "packages": {}}
        if args[:1] in (["host-debug"], ["netconsole"]) and args[1:2] != ["read"]:
            self._fence()  # the agent fences every change of the host, restores included
        if args[:2] == ["host-debug", "apply"]:
            self.fake.host_debug = {**SYSCTL_DEFAULTS, **{k: int(v) for k, v in json.loads(args[3]).items()}}
            self.fake.host_debug_applies.append(self.fake.boot_id)
            return {"ok": True, "values": dict(self.fake.host_debug)}
        if args[:2] == ["host-debug", "read"]:
            return {"ok": True, "values": dict(self.fake.host_debug)}
        if args[:2] == ["host-debug", "restore"]:
            self.fake.host_debug = dict(SYSCTL_DEFAULTS)
            return {"ok": True, "values": dict(self.fake.host_debug)}
        return {"ok": True}

    def health(self, gpu: int, *, bus_id: str | None = None, expect_gpus: int | None = None,
               smi_timeout_s: float = 20.0) -> replies.HealthReply:
        """The agent's `health` (collectors/gpu_health.py), worded as it words a GPU off the bus."""
        self._call()
        self.fake.health_calls.append({"gpu": gpu, "bus_id": bus_id, "expect_gpus": expect_gpus})
        if self.fake.health_fails:
            raise AgentError(self.host, self.fake.health_fails)
        bus = bus_id or "00000000:01:00.0"
        if self.fake.gpu_lost:
            checks = [
                {"name": "nvml", "ok": False, "lost": True, "short": "NVML: GPU is lost",
                 "words": f"nvmlDeviceGetHandleByIndex({gpu}): GPU is lost (NVMLError_GpuIsLost)"},
                {"name": "pci", "ok": False, "lost": True, "short": "lspci rev ff",
                 "words": "0000:01:00.0 reads all ones (lspci: rev ff): the GPU fell off the bus"},
                {"name": "nvidia_smi", "ok": False, "lost": True, "short": "nvidia-smi exit 15",
                 "words": f"nvidia-smi -i {bus} exit 15 (the GPU has fallen off the bus or has otherwise become "
                          "inaccessible): Unable to determine the device handle for GPU 0000:01:00.0: GPU is lost.  "
                          "Reboot the system to recover this GPU"}]
        else:
            checks = [{"name": name, "ok": True, "lost": False, "words": f"{name} ok", "short": f"{name} ok"}
                      for name in replies.HEALTH_CHECKS]
        return replies.parse_health(self.host, {"k": "health", "gpu": gpu, "bus_id": bus, "boot_id": self.fake.boot_id,
                                                "ok": not self.fake.gpu_lost, "lost": self.fake.gpu_lost,
                                                "checks": checks})

    def postboot(self, boot_id: str | None = None) -> replies.Postboot:
        self._call()
        self.fake.postboot_asked.append(boot_id)
        return replies.parse_postboot(self.host, {
            "k": "postboot", "boot_id": self.fake.boot_id, "journal_persistent": True, "pstore": [],
            "previous_boot": {"available": True, "findings": [{"line": "NVRM: Xid 79"}], "tail": ["NVRM: Xid 79"],
                              "shutdown": self._shutdown(boot_id)}})

    def _shutdown(self, boot_id: str | None) -> dict[str, Any]:
        """How the boot ``boot_id`` (else the previous one) ended, as collectors/shutdown_evidence.py words it."""
        boot = boot_id if boot_id is not None else self.fake.boot_ids[-2] if len(self.fake.boot_ids) > 1 else None
        by = self.fake.shut_down_by.get(boot or "")
        if by is None:
            return {"orderly": False, "by": None, "lines": [], "available": True}
        return {"orderly": True, "by": by, "available": True,
                "lines": ["systemd[1]: Reached target reboot.target - System Reboot.", "systemd-shutdown[1]: Syncing filesystems and block devices."]}

    def host_debug(self, args: list[str]) -> replies.HostDebugReply:
        self.calls.append(["host-debug", *args])
        if self.fake is None:
            values = {"hardlockup_panic": 1, "panic": 5, "nmi_watchdog": 1} if args[0] == "apply" else {"panic": 0}
            return replies.HostDebugReply(self.ok, values, () if self.ok else ("write refused",))
        return replies.parse_host_debug(self.host, {"k": "host_debug", **self.one(["host-debug", *args], "host_debug")})

    def runtime(self, args: list[str], timeout: float) -> replies.RuntimeReply:
        return replies.parse_runtime(self.host, {"k": "runtime", **self.one(["runtime", *args], "runtime", timeout)})

    def netconsole(self, args: list[str]) -> replies.NetconsoleReply:
        self.calls.append(["netconsole", *args])
        if self.fake is None:
            if self.fail:
                raise AgentError(self.host, "netconsole: no route")
            return replies.NetconsoleReply(self.ok, {"local_ip": "10.0.0.7", "remote_port": "6666"}, (8, 4, 1, 7),
                                           () if self.ok else ("modprobe failed",), ("broadcast MAC",))
        return replies.parse_netconsole(self.host, {"k": "netconsole", **self.one(["netconsole", *args], "netconsole")})

    def run(self, attempt_id: str, argv: list[str], *, timeout: float, env: Mapping[str, str] | None = None,
            gpu: int = 0, sample_hz: float = 10.0, clock_threshold: float = 0.0,
            container: str | None = None, secrets: Mapping[str, Any] | None = None,
            key: Any = None) -> "FakeStream":
        self._call()
        holder = self.fake.lease_holder
        if self.lease_token and (holder is None or holder.get("token") != self.lease_token):  # host_lease.check
            return FakeStream(self.fake, attempt_id, "fenced", timeout,
                              busy_with=str((holder or {}).get("controller", "another controller")))
        if holder is not None:
            holder["renewed"] = self.fake.clock.monotonic()  # every attempt renews the lease
        self.fake.containers[attempt_id] = container
        self.fake.runs[attempt_id] = (list(argv), dict(env or {}), dict(secrets or {}))
        if self.fake.orphans:  # the real agent refuses while another attempt's supervisor is alive
            self.fake.refused.append(attempt_id)
            return FakeStream(self.fake, attempt_id, "busy", timeout, busy_with=str(self.fake.orphans[0]["id"]))
        self.fake.started[attempt_id] = self.fake.boot_id
        outcome = self.fake.next_outcome()
        return FakeStream(self.fake, attempt_id, "stopped" if self.fake.stopping else outcome, timeout)

    def attach(self, attempt_id: str, from_seq: int, key: Any = None) -> "FakeStream":
        self._call()
        self.fake.attaches.append(self.fake.clock.monotonic())
        if self.fake.started.get(attempt_id) not in (None, self.fake.boot_id) or attempt_id in self.fake.lost:
            return FakeStream(self.fake, attempt_id, "lost", 0.0, from_seq)  # its supervisor died with the boot
        if attempt_id in self.fake.finished:  # its exit file and stream, read again from the first line
            return FakeStream(self.fake, attempt_id, self.fake.finished[attempt_id], 30.0, from_seq)
        running = next((o for o in self.fake.orphans if o["id"] == attempt_id), None)
        if running is not None and from_seq == 0:  # a dead controller's attempt, still running: followed
            self.fake.orphans.remove(running)
            self.fake.attempts_run += 1
            return FakeStream(self.fake, attempt_id, str(running.get("outcome", "clean")), 30.0, from_seq)
        raise ConnectError(self.fake.name, "the fake host keeps no live attempt to attach to")


class FakeStream:
    """One attempt's stream: a few phases and log lines, then its scripted end."""

    def __init__(self, fake: FakeHost, attempt_id: str, outcome: str, timeout_s: float, from_seq: int = 0,
                 busy_with: str = "") -> None:
        self.fake = fake
        self.busy_with = busy_with
        self.from_seq = from_seq
        self._ended = False  # its scripted end happened: a dead channel from now on
        self.outcome = outcome
        self.started = fake.clock.monotonic()
        self.timeout_s = timeout_s
        self.finished = False
        self._lines = self._script(attempt_id)

    def _script(self, attempt_id: str) -> Iterator[dict[str, Any]]:
        seq = itertools.count(self.from_seq)
        if self.outcome == "fenced":
            yield {"k": "error", "code": "fenced",
                   "error": f"this controller's lease was taken over by {self.busy_with}: it must not act on "
                            "this host any more"}
            return
        if self.outcome == "busy":  # collectors/agent.py's refusal, as PROTOCOL.md words it
            yield {"k": "error", "code": "busy",
                   "error": f"attempt {self.busy_with} is still running on this host (started 42 s ago): "
                            "kill it or judge it before starting another"}
            return
        if self.outcome == "lost":  # attach after the host reset itself: the agent found no exit
            yield {"k": "exit", "seq": next(seq), "lost": True, "rebooted": True}
            return
        yield {"k": "start", "seq": next(seq), "attempt": attempt_id}
        if self.outcome == "stopped":  # started on a stopping host: its session's stop takes it at once
            yield {"k": "exit", "seq": next(seq), "rc": 143, "signal": 15, "stopped_by": "host_shutdown",
                   "shutdown": "systemctl is-system-running: stopping"}
            return
        for phase in self.fake.phases:
            yield {"k": "phase", "seq": next(seq), "phase": phase}
            yield {"k": "log", "seq": next(seq), "line": f"entering {phase}"}
        if self.outcome in ("wedge", "reboot", "orderly_reboot", "lockup", "stuck", "power_off"):
            return
        if self.outcome == "hang":
            while self.fake.clock.monotonic() < self.started + self.timeout_s:
                yield {"k": "hb"}
            yield {"k": "exit", "seq": next(seq), "timed_out": True, "rc": -9}
            return
        if self.outcome == "orderly_stop":  # systemd stops the session's scope: SIGTERM, and the agent reads why
            yield {"k": "exit", "seq": next(seq), "rc": 143, "signal": 15, "stopped_by": "host_shutdown",
                   "shutdown": "systemctl is-system-running: stopping"}
            return
        yield {"k": "exit", "seq": next(seq), "rc": 1 if self.outcome == "error" else 0}

    def next_event(self, timeout: float) -> StreamEvent | None:
        clock = self.fake.clock
        if self.finished or self._ended or not self.fake.up:
            _settle_probe_rounds()
            clock.sleep(timeout)
            return None
        clock.sleep(min(timeout, LINE_GAP_S))
        line = next(self._lines, None)
        if line is None:
            self._ended = True
            panics = self.outcome == "lockup" and self.fake.host_debug.get("softlockup_panic") == 1
            if self.outcome == "wedge" or (self.outcome == "lockup" and not panics):
                self.fake.freeze()  # a lockup the kernel does not panic on is a wedge
            elif self.outcome == "reboot" or panics:
                self.fake.reset_itself()
            elif self.outcome == "orderly_reboot":  # a person's `reboot`, or an upgrade's: systemd stops it all
                self.fake.shut_down_by[self.fake.boot_id] = "unattended-upgrades (its automatic reboot after an upgrade)"
                self.fake.reset_itself()
            elif self.outcome == "power_off":  # its plug switched itself off (a timer, an overload trip)
                self.fake.lose_power()
            elif self.outcome == "stuck":  # the agent stops streaming; the host answers, the channel stays open
                pass
            else:
                self.finished = True
            return None
        if line["k"] == "exit":
            self.finished = True
            if self.outcome == "orderly_stop":  # the agent's exit said so; the boot goes down a little later
                self.fake.begin_stopping()
            if self.outcome.startswith("freeze-after"):
                self.fake.freeze()
        return parse_event(self.fake.name, json.dumps({"t": clock.wall(), **line}))

    def close(self) -> None:
        self.finished = True


def _settle_probe_rounds(real_cap_s: float = 1.0) -> None:
    """Let the watchdog's probe threads (instant against a fake host) finish before time moves on,
    so a verdict never depends on how the OS scheduled them."""
    deadline = time.monotonic() + real_cap_s
    while time.monotonic() < deadline and any(t.name == "liveness-round" for t in threading.enumerate()):
        time.sleep(0.0005)


# -- a campaign of one fake host -----------------------------------------------------------

# what the fleet tests ran with (fleet_campaign.settings_for): a 1 s dwell, stability and grace
FLEET_TEST_SETTINGS: dict[str, Any] = {"controller": "pytest", "dwell_s": 1.0, "stability_s": 1.0, "reboot_grace_s": 1.0}


def seam_context(playbook: Playbook, root: Path, clock: VirtualClock, timings: Timings = Timings(),
                 **settings: Any) -> CampaignContext:
    directory = CampaignDir(root / "seam-campaign").create()
    run_settings = RunSettings(transport=TransportSettings(known_hosts=root / "known_hosts")).with_timings(timings)
    settings = {**FLEET_TEST_SETTINGS, **settings}
    ctx = CampaignContext(
        campaign_id="seam-campaign", directory=directory, playbook=playbook,
        settings=replace(run_settings, **settings), bundle=AgentBundle((), "fakeagent01"),
        poc_script=POC_BYTES, attempt_log=AttemptLog(directory.attempts), events=JsonlAppender(directory.events),
        fleet=FleetLiveness(timings.fleet_window_s), stop=threading.Event(), clock=clock,
        power=recovery_factory(directory),
    )
    announce_power_control(ctx.fleet, ctx.event)
    return ctx


def plan_of(playbook: Playbook) -> list[tuple[Cell, int]]:
    return [(cell, i) for i in range(playbook.attempts) for cell in playbook.cells]


def run_host(fake: FakeHost, ctx: CampaignContext, plan: list[tuple[Cell, int]] | None = None,
             **kwargs: Any) -> HostRunner:
    """One host's share of a campaign against ``fake``, start to end."""
    runner = HostRunner(ctx, fake.host, plan if plan is not None else plan_of(ctx.playbook),
                        port=fake.port(ctx), **kwargs)  # type: ignore[arg-type]
    runner.run()
    return runner


def records(ctx: CampaignContext) -> list[dict[str, Any]]:
    path = ctx.directory.attempts
    return sorted(read_records(path), key=lambda r: r["attempt_index"]) if path.exists() else []


def events(ctx: CampaignContext, *names: str) -> list[dict[str, Any]]:
    path = ctx.directory.events
    found = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [e for e in found if not names or e["event"] in names]


def power_actions(ctx: CampaignContext) -> list[dict[str, Any]]:
    path = ctx.directory.power
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def recovery_path(ctx: CampaignContext) -> list[str]:
    return [e["to"] for e in events(ctx, "recovery")]


def outcomes(ctx: CampaignContext) -> list[tuple[int, str]]:
    return [(r["attempt_index"], r["outcome"]) for r in records(ctx)]


def started_by_a_dead_controller(ctx: CampaignContext, host: FakeHost, attempt_id: str, index: int = 0) -> Cell:
    """What a killed controller's events.jsonl says: this attempt of the first cell started on ``host``."""
    cell = ctx.playbook.cells[0]
    ctx.started_slots[attempt_id] = (cell, index)
    ctx.started_on[attempt_id] = host.name
    return cell


__all__ = ["Device", "EventKind", "FakeHost", "run_fake_campaign", "seam_book", "seam_settings", "events", "plan_of", "power_actions", "records", "recovery_path",
           "outcomes", "run_host", "seam_context", "started_by_a_dead_controller"]


def seam_book(root: Path, *cells: Cell, attempts: int = 3, attempt_timeout: float = 30.0, boot: float = 60.0,
              **fields: Any) -> Playbook:
    """A playbook of ``cells`` (one reference cell when none), with the fleet tests' deadlines."""
    from reprofleet.model import Timeouts
    from tests.support.scripted_runner import book, cell

    root.mkdir(parents=True, exist_ok=True)
    playbook = book(root, *(cells or (cell("ref", 0),)), attempts=attempts)
    return replace(playbook, timeouts=Timeouts(attempt=attempt_timeout, boot=boot), **fields)


def seam_settings(root: Path, timings: Timings = Timings(), **overrides: Any) -> RunSettings:
    """The fleet tests' RunSettings (fleet_campaign.settings_for), every other wait from ``timings``."""
    base = RunSettings(transport=TransportSettings(known_hosts=root / "known_hosts"), sample_hz=5.0).with_timings(timings)
    return replace(base, **{**FLEET_TEST_SETTINGS, **overrides})


def run_fake_campaign(plan: Any, fakes: Sequence[FakeHost], settings: RunSettings, reports: Path,
                      clock: VirtualClock, progress: Callable[..., None] = lambda host, **fields: None) -> list[Any]:
    """``run_campaign`` against fake hosts, one host at a time (each result in turn).

    One host per run keeps virtual time a single timeline: two host threads sleeping on one
    virtual clock would move each other's time. Hosts of one campaign are independent, so
    running them in turn into the same campaign folder gives the same records and events.
    """
    from reprofleet.campaign.run import CampaignPlan, run_campaign

    by_name = {f.name: f for f in fakes}
    results = []
    for host in plan.hosts:
        one = CampaignPlan(plan.campaign_id, plan.playbook, (host,), {host.name: plan.per_host[host.name]})
        results.append(run_campaign(one, settings, reports, recovery_factory=recovery_factory, clock=clock,
                                    progress=progress,
                                    port_for=lambda ctx, h: by_name[h.name].port(ctx), network_ok=lambda: True))
    return results
