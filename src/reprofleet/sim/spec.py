"""What a simulated host is made of, and the YAML fleet config that lists them.

    defaults:            # optional; every key of a host, applied to all hosts
      time_scale: 0.05
    hosts:
      - name: sim-a
        susceptible: true
        p_wedge: 0.5
        script: [clean, wedge]   # forced outcomes, one per attempt, then the random model

The spec is the simulation's ground truth: reprofleet's measured wedge rates are checked
against ``p_wedge`` and friends.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import yaml

from reprofleet.errors import InputError, Location
from reprofleet.sim.rfsim.wedge import LOCKUP_KINDS, SCRIPT_ENTRIES, WedgeParams

HOST_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")
LOGIN_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,30}$")
SUDO_RULES = ("all", "nvidia-smi", "none")  # the login's NOPASSWD rights (rfsim/sudo.py)
WEDGE_PHASES = (
    "engine_init", "model_load", "torch_compile", "kv_cache", "flashinfer_autotune",
    "attention_warmup", "kernel_warmup", "cuda_graph_capture", "ready",
)


class FleetConfigError(InputError):
    """A simulated fleet config (YAML) is invalid."""


@dataclass(frozen=True)
class SimHostSpec:
    """One simulated host: identity, wedge-model truth, timings, forensics knobs."""

    name: str
    susceptible: bool = True
    p_wedge: float = 0.35
    safe_clock_mhz: int = 2800
    wedge_ramp_mhz: float = 0.0  # 0: a step at safe_clock_mhz; else P(wedge) rises linearly to p_wedge over it
    p_error: float = 0.03
    p_hang: float = 0.02
    p_reboot: float = 0.0
    spec_tokens_factor: float = 0.0
    cuda_launch_blocking_factor: float = 0.0
    enforce_eager_factor: float = 0.0
    vllm_fixed_in: str = "0.26.0"  # versions from this one on get vllm_factors / vllm_fixed_factor
    vllm_fixed_factor: float = 0.0
    vllm_factors: tuple[tuple[str, float], ...] = (("0.26", 0.2),)  # version prefix -> factor
    script: tuple[str, ...] = ()
    seed: int | None = None  # None: derived from the name
    time_scale: float = 0.05
    boot_delay_s: float = 2.0
    journal_persistent: bool = True
    journal_keeps_frozen_boot: bool = True  # False: a frozen boot's kernel log never reached the disk
    xid_on_wedge: bool = False
    wedge_phase: str = "cuda_graph_capture"
    vllm_version: str = "0.25.1"
    p_lockup_seen: float = 0.0  # share of wedges the kernel's lockup watchdog sees (script entry: lockup)
    lockup_kind: str = "soft"  # soft | hard
    lockup_detect_s: float = 1.0  # freeze -> the watchdog's report (a real kernel: ~20 s soft, ~10 s hard)
    hang_ignores_sigterm: bool = False  # a hang stuck in a driver call: its SIGTERM handler never runs, only SIGKILL ends it
    gpu_lost_after_wedge: bool = False  # a wedge takes the GPU off the bus for good: no power cycle brings it back
    hardware_watchdog: bool = False  # an armed hardware watchdog: what a ``reboot`` outcome (a reset by itself) is
    login_user: str = "root"  # who the controller logs in as; another name is a user of the host's own (uid 4242)
    sudo: str = "all"  # what that user may run through ``sudo`` without a password: all | nvidia-smi | none
    # the BIOS's "restore on AC power loss": False is "stay off", a desktop's common default: power coming
    # back at the outlet does not start it (only its power button would)
    restores_on_ac: bool = True
    # the owner's one-time kernel settings, applied at every boot as /etc/sysctl.d would (a
    # ``sysctl -w`` during a boot is forgotten at the next): e.g. (("unknown_nmi_panic", 1),)
    sysctl_conf: tuple[tuple[str, int], ...] = ()
    kdump_loaded: bool = False  # kdump-tools loads a capture kernel at boot (/sys/kernel/kexec_crash_loaded = 1)
    # NVIDIA's container toolkit: False is a host whose dockerd has no ``nvidia`` runtime (``docker
    # info`` lists none, ``--gpus`` is refused), as before ``nvidia-ctk runtime configure``
    nvidia_container_toolkit: bool = True

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise ValueError(f"host {self.name!r}: " + "; ".join(problems))

    @property
    def effective_seed(self) -> int:
        if self.seed is not None:
            return self.seed
        return sum((i + 1) * ord(c) for i, c in enumerate(self.name))

    def wedge_params(self) -> WedgeParams:
        return WedgeParams.from_config(self.host_config())

    def host_config(self) -> dict[str, Any]:
        """The JSON the host's fake tools read from /etc/reprofleet-sim/host.json."""
        config = asdict(self)
        config["script"] = list(self.script)
        config["vllm_factors"] = [list(pair) for pair in self.vllm_factors]
        config["sysctl_conf"] = [list(pair) for pair in self.sysctl_conf]
        config["seed"] = self.effective_seed
        return config


def _problems(spec: SimHostSpec) -> list[str]:
    problems = []
    if any(not re.fullmatch(r"[a-z][a-z0-9_]*", name) for name, _ in spec.sysctl_conf):
        problems.append("sysctl_conf names are kernel.* sysctl names (lowercase letters, digits, '_')")
    if not HOST_NAME.match(spec.name):
        problems.append("name must be lowercase letters, digits and '-', at most 32 characters")
    for name in ("p_wedge", "p_error", "p_hang", "p_reboot", "p_lockup_seen"):
        if not 0.0 <= getattr(spec, name) <= 1.0:
            problems.append(f"{name} must be between 0 and 1")
    if spec.p_wedge + spec.p_error + spec.p_hang + spec.p_reboot > 1.0:
        problems.append("p_wedge + p_error + p_hang + p_reboot must not exceed 1")
    bad = [s for s in spec.script if s not in SCRIPT_ENTRIES]
    if bad:
        problems.append(f"script entries {bad} are not among {', '.join(SCRIPT_ENTRIES)}")
    if spec.lockup_kind not in LOCKUP_KINDS or spec.lockup_detect_s < 0:
        problems.append(f"lockup_kind must be one of {', '.join(LOCKUP_KINDS)} and lockup_detect_s >= 0")
    if spec.wedge_phase not in WEDGE_PHASES:
        problems.append(f"wedge_phase must be one of {', '.join(WEDGE_PHASES)}")
    if (spec.p_reboot > 0 or "reboot" in spec.script) and not spec.hardware_watchdog:
        problems.append("a reboot outcome is the host resetting itself: give it a way to, hardware_watchdog: true")
    if not LOGIN_NAME.match(spec.login_user) or spec.sudo not in SUDO_RULES:
        problems.append(f"login_user must be a user name (lowercase, digits, '-', '_'), sudo one of {', '.join(SUDO_RULES)}")
    if spec.wedge_ramp_mhz < 0:
        problems.append("wedge_ramp_mhz must be >= 0 (0: a step at safe_clock_mhz)")
    if spec.time_scale <= 0 or spec.boot_delay_s < 0:
        problems.append("time_scale must be > 0 and boot_delay_s >= 0")
    return problems


def spec_from_mapping(values: Mapping[str, Any]) -> SimHostSpec:
    """Build a spec from plain data (YAML/JSON), converting lists to tuples."""
    known = {f.name for f in fields(SimHostSpec)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    data = dict(values)
    if "script" in data:
        data["script"] = tuple(str(s) for s in (data["script"] or ()))
    if "vllm_factors" in data:
        raw = data["vllm_factors"] or {}
        pairs = raw.items() if isinstance(raw, Mapping) else raw
        data["vllm_factors"] = tuple((str(k), float(v)) for k, v in pairs)
    if "sysctl_conf" in data:  # a mapping in YAML (unknown_nmi_panic: 1), pairs in the manifest's JSON
        raw = data["sysctl_conf"] or {}
        pairs = raw.items() if isinstance(raw, Mapping) else raw
        data["sysctl_conf"] = tuple((str(k), int(v)) for k, v in pairs)
    return SimHostSpec(**data)


def load_fleet_config(path: str | Path) -> tuple[SimHostSpec, ...]:
    """Read a fleet config; errors name the file, the line and the key."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise FleetConfigError(Location(str(path)), f"cannot read: {exc}") from exc
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise FleetConfigError(Location(str(path), None if line is None else line + 1), str(exc))
    return _specs_from_node(root, str(path))


def _specs_from_node(root: yaml.Node | None, file: str) -> tuple[SimHostSpec, ...]:
    if not isinstance(root, yaml.MappingNode):
        raise FleetConfigError(Location(file, 1), "expected a mapping with 'hosts:'")
    top = {key.value: value for key, value in root.value}
    extra = sorted(set(top) - {"defaults", "hosts"})
    if extra:
        raise FleetConfigError(Location(file, 1, extra[0]), "unknown top-level key; use defaults, hosts")
    defaults = yaml.safe_load(yaml.serialize(top["defaults"])) if "defaults" in top else {}
    hosts_node = top.get("hosts")
    if not isinstance(hosts_node, yaml.SequenceNode) or not hosts_node.value:
        raise FleetConfigError(Location(file, _line(hosts_node or root), "hosts"), "needs a non-empty list")
    specs = []
    for index, node in enumerate(hosts_node.value):
        where = Location(file, _line(node), f"hosts[{index}]")
        values = yaml.safe_load(yaml.serialize(node))
        if not isinstance(values, dict):
            raise FleetConfigError(where, "each host must be a mapping with at least 'name'")
        try:
            specs.append(spec_from_mapping({**(defaults or {}), **values}))
        except (TypeError, ValueError) as exc:
            raise FleetConfigError(where, str(exc)) from exc
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise FleetConfigError(Location(file, _line(hosts_node), "hosts"), "host names must be unique")
    return tuple(specs)


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def demo_config_path() -> Path:
    """The demo fleet shipped as package data (3 hosts; see fleets/demo.yml)."""
    return Path(str(resources.files("reprofleet.sim").joinpath("fleets/demo.yml")))


def demo_specs(count: int = 3) -> tuple[SimHostSpec, ...]:
    """``count`` hosts: the demo's first ones, then more like the demo's last one."""
    base = load_fleet_config(demo_config_path())
    specs = list(base[:count])
    for i in range(len(specs), count):
        template = asdict(base[-1])
        template.update(name=f"sim{i}", seed=None)
        specs.append(spec_from_mapping(template))
    return tuple(specs)
