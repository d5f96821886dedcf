"""A simulated fleet: real sshd hosts in network namespaces, fake GPUs, one hardware daemon.

    fleet = Fleet.up(demo_specs(3))          # returns when every sshd answers
    ssh -i fleet.key_path -o UserKnownHostsFile=fleet.known_hosts_path root@<address>
    fleet.hosts[0].freeze(); fleet.hosts[0].power_cycle()
    fleet.down()                             # nothing of the run is left

Must run as root (namespaces, cgroups, iptables). Another process can take over with
``Fleet.attach(fleet_dir)``: everything is described by ``<fleet_dir>/fleet.json``.
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from reprofleet.sim import dockerd, hostfs, image_store, images, netns, packages
from reprofleet.sim import manifest as manifest_io
from reprofleet.sim.cgroup import FREEZER_ROOT, FreezerGroup
from reprofleet.sim.host import SimHost
from reprofleet.sim.inventory_file import write_inventory
from reprofleet.sim.layout import DEFAULT_BASE, HOST_ETC, PREFIX, FleetPaths, shadowed_by_host
from reprofleet.sim.manifest import FleetManifest, HostRecord
from reprofleet.sim.procs import ProcessRef, SimError, run, spawn_detached, wait_until
from reprofleet.sim.rfsim import gpu, hwio
from reprofleet.sim.spec import SimHostSpec
from reprofleet.sim.teardown import register, run_objects, teardown

READY_TIMEOUT_S = 30.0
TOOLS = ("ip", "iptables-restore", "unshare", "mount", "ssh-keygen", "/usr/sbin/sshd", "/usr/bin/python3",
         str(dockerd.DOCKERD), str(dockerd.CLIENT))
IMAGE_CACHE = DEFAULT_BASE / "images"  # the images' root file system, built once per machine (sim/images.py)


class Fleet:
    def __init__(self, manifest: FleetManifest) -> None:
        self.manifest = manifest
        self.paths = FleetPaths(Path(manifest.fleet_dir))
        self.hosts: tuple[SimHost, ...] = tuple(SimHost(r, self.paths) for r in manifest.hosts)

    def __repr__(self) -> str:
        return f"Fleet({self.run_id!r}, {len(self.hosts)} hosts, {self.manifest.subnet})"

    def __enter__(self) -> "Fleet":
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    @property
    def run_id(self) -> str:
        return self.manifest.run_id

    @property
    def fleet_dir(self) -> Path:
        return self.paths.root

    @property
    def inventory_path(self) -> Path:
        return self.paths.inventory

    @property
    def known_hosts_path(self) -> Path:
        return self.paths.known_hosts

    @property
    def key_path(self) -> Path:
        return self.paths.key

    def host(self, name: str) -> SimHost:
        for host in self.hosts:
            if host.name == name:
                return host
        raise SimError(f"no host {name!r} in fleet {self.run_id}")

    # -- life cycle --------------------------------------------------------------------
    @classmethod
    def up(cls, specs: Sequence[SimHostSpec], base_dir: str | Path | None = None,
           run_id: str | None = None, *, ready_timeout_s: float = READY_TIMEOUT_S,
           outlive_caller: bool = False, before_boot: Callable[["Fleet"], None] | None = None) -> "Fleet":
        """Build and boot the fleet; return once every host's sshd answers (or clean up and raise).

        The fleet's owner is the calling process, so a test killed mid-run leaves a fleet the
        next sweep removes; ``outlive_caller`` (``invoke sim.up``) hands it to the hardware
        daemon instead, and it lives until ``sim.down``. ``before_boot`` is called with the
        built fleet before any host is switched on: what the hosts' boot services need (a Slurm
        cluster's slurm.conf, ``sim/slurm_cluster.py``) is in place when they first boot.
        """
        _preflight(specs)
        if run_id is not None and not re.fullmatch(r"[0-9a-f]{4,6}", run_id):
            raise SimError(f"run id {run_id!r} must be 4 to 6 lowercase hex digits (it names kernel objects)")
        run_id = run_id or _new_run_id()
        fleet_dir = Path(base_dir or DEFAULT_BASE) / run_id
        _check_fleet_dir(fleet_dir)
        fleet_dir.mkdir(parents=True, mode=0o700)
        register(run_id, ProcessRef.of(os.getpid()), fleet_dir)
        hardware = None
        try:
            manifest = _build(run_id, fleet_dir, specs)
            hardware = _start_hardware(FleetPaths(fleet_dir))
            manifest = manifest.with_hardware(hardware)
            manifest_io.save(manifest)
            if outlive_caller:
                register(run_id, hardware, fleet_dir)
            fleet = cls(manifest)
            if before_boot is not None:
                before_boot(fleet)
            for host in fleet.hosts:
                host.set_switch(True)
            fleet.wait_ready(ready_timeout_s)
            return fleet
        except BaseException:
            teardown(run_id, hardware=hardware, fleet_dir=fleet_dir, remove_files=False)
            raise

    @classmethod
    def attach(cls, fleet_dir: str | Path) -> "Fleet":
        return cls(manifest_io.load(fleet_dir))

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        for host in self.hosts:
            host.wait_ssh(max(0.1, deadline - time.monotonic()))

    def down(self, remove_files: bool = True) -> None:
        """Kill every process by PID, delete netns/veth/bridge/cgroups, wait for the veths."""
        teardown(self.run_id, hardware=self.manifest.hardware, fleet_dir=self.fleet_dir,
                 remove_files=remove_files)

    def leftovers(self) -> dict[str, list[str]]:
        """Kernel objects of this run that still exist (empty lists after down())."""
        objects = run_objects(self.run_id)
        hardware = self.manifest.hardware
        objects["processes"] = [str(hardware.pid)] if hardware and hardware.alive() else []
        return objects

    # -- observing and faults ----------------------------------------------------------
    def status(self) -> list[dict[str, Any]]:
        rows = []
        for host in self.hosts:
            state = host.hardware_state()
            try:
                card = host.gpu_state()
            except FileNotFoundError:
                card = {}
            rows.append({
                "name": host.name, "address": host.address, "power": state.get("power", "unknown"),
                "frozen": host.is_frozen, "stalled": bool(state.get("stalled")),
                "boot_id": host.boot_id, "sshd_pid": host.sshd_pid,
                "gpu_policy": {k: card.get(k) for k in gpu.SETTINGS_DEFAULTS if k != "compute_mode"},
                "susceptible": host.spec.susceptible, "p_wedge": host.spec.p_wedge,
            })
        return rows

    def events(self) -> list[dict[str, Any]]:
        """hardware.jsonl: every power change, boot and wedge, oldest first."""
        text = self.paths.hardware_events.read_text() if self.paths.hardware_events.exists() else ""
        return [e for e in map(hwio.read_json_line, text.splitlines()) if e is not None]

    def cut_controller_network(self) -> None:
        """The controller's own network fails: its link to the switch (the bridge's uplink) and
        every host link go down at once, so the controller sees no carrier."""
        netns.set_link(netns.uplink_of(self.manifest.bridge), up=False)
        for host in self.hosts:
            host.cut_link()

    def restore_controller_network(self) -> None:
        for host in self.hosts:
            host.restore_link()
        netns.set_link(netns.uplink_of(self.manifest.bridge), up=True)

    def switch_outage(self, down: bool) -> None:
        """The hosts' top-of-rack switch reboots (or STP reconverges): every frame to and from
        every host is lost, while links keep their carrier and the controller's own side (its
        link, the PDUs it reaches) keeps working. (A switch drops frames; our hosts' ports stay
        up, so the model is loss on each host's NIC, both ways.)"""
        for host in self.hosts:
            host.set_packet_loss(100 if down else 0, both_ways=True)

    def attach_plug(self, personality: str = "tasmota") -> Any:
        """Put every host on one simulated HTTP smart plug (outlet i+1 = host i) and rewrite
        the fleet's inventory with the ``pdu:`` blocks, so a campaign can power-cycle hosts.

        ``personality``: tasmota | shelly1 | shelly2. The plug runs under
        ``<fleet>/power/<personality>`` and is stopped by :meth:`down`.
        """
        from reprofleet.sim.power import HttpPlugServer

        outlets = {str(i + 1): host.paths.power for i, host in enumerate(self.hosts)}
        plug = HttpPlugServer(self.fleet_dir / "power" / personality, personality, outlets).start()
        blocks = {host.name: plug.pdu_block(str(i + 1)) for i, host in enumerate(self.hosts)}
        self.write_inventory(self.inventory_path, pdu=blocks)
        return plug

    def write_inventory(self, path: str | Path, hosts: Iterable[str] | None = None,
                        pdu: Mapping[str, Mapping[str, Any]] | None = None) -> Path:
        """An Ansible inventory for some hosts (default all), with optional ``pdu:`` blocks."""
        chosen = [self.host(n) for n in hosts] if hosts is not None else list(self.hosts)
        return write_inventory(Path(path), chosen, self.paths, pdu or {})


# -- building ------------------------------------------------------------------------------
def _preflight(specs: Sequence[SimHostSpec]) -> None:
    if os.geteuid() != 0:
        raise SimError("the simulated fleet needs root (network namespaces, cgroups, iptables)")
    if not specs:
        raise SimError("a fleet needs at least one host")
    if len({s.name for s in specs}) != len(specs):
        raise SimError("host names must be unique")
    if len(specs) > 240:
        raise SimError("at most 240 hosts fit in one /24")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        raise SimError(f"missing tools: {', '.join(missing)} (apt: iproute2 iptables openssh-server docker.io)")
    if not FREEZER_ROOT.is_dir():
        raise SimError(f"no cgroup v1 freezer mounted at {FREEZER_ROOT}")


def _new_run_id() -> str:
    for _ in range(20):
        candidate = secrets.token_hex(3)
        if not any(run_objects(candidate).values()):
            return candidate
    raise SimError("could not find an unused run id")


def _check_fleet_dir(fleet_dir: Path) -> None:
    hidden = shadowed_by_host(fleet_dir)
    if hidden is not None:
        raise SimError(f"{fleet_dir} is under {hidden}, which every simulated host shadows; "
                       "use a directory elsewhere (default /var/lib/reprofleet-sim)")
    if fleet_dir.exists():
        raise SimError(f"{fleet_dir} already exists")


def _build(run_id: str, fleet_dir: Path, specs: Sequence[SimHostSpec]) -> FleetManifest:
    paths = FleetPaths(fleet_dir)
    dist_packages = _host_dist_packages()
    for mount_point in (HOST_ETC, dist_packages):
        mount_point.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"reprofleet-sim-{run_id}", "-f", str(paths.key)])
    shutil.copyfile(paths.key.with_suffix(".pub"), paths.authorized_keys)
    with netns.allocation_lock():
        subnet = netns.pick_subnet(int(run_id, 16))
        gateway = ipaddress.IPv4Interface(f"{subnet[1]}/24")
        bridge = f"{PREFIX}{run_id}-br"
        netns.create_bridge(bridge, gateway)
    # every host's dockerd starts with the images the playbooks and tests name, and each host's own
    store = image_store.ensure_store(IMAGE_CACHE, sorted({*images.DEFAULT_VLLM_TAGS, *(s.vllm_version for s in specs)}))
    records = tuple(
        _build_host(paths, run_id, i, spec, subnet, bridge, dist_packages, store)
        for i, spec in enumerate(specs)
    )
    manifest = FleetManifest(run_id, str(fleet_dir), str(subnet), str(gateway.ip), bridge,
                             str(dist_packages), time.time(), records)
    manifest_io.save(manifest)
    _write_known_hosts(paths, records)
    write_inventory(paths.inventory, [SimHost(r, paths) for r in records], paths, {})
    return manifest


def _build_host(paths: FleetPaths, run_id: str, index: int, spec: SimHostSpec,
                subnet: ipaddress.IPv4Network, bridge: str, dist_packages: Path, store: Path) -> HostRecord:
    name = f"{PREFIX}{run_id}-{index}"
    address = ipaddress.IPv4Interface(f"{subnet[10 + index]}/{subnet.prefixlen}")
    record = HostRecord(spec.name, index, name, name, str(address.ip), name, spec)
    host = paths.host(spec.name)
    hostfs.make_host_tree(host, spec.journal_persistent, spec.login_user, paths.authorized_keys,
                          name, spec.nvidia_container_toolkit)
    image_store.fill(store, host.docker / "data")  # the images its dockerd finds at its first start
    packages.install_host(host, spec.vllm_version)  # dist-info for the runtime probe, a wheelhouse for venvs
    hwio.write_json(host.host_config, spec.host_config())
    hwio.write_json(host.gpu_state(0), gpu.initial_state(f"{spec.name}/{spec.effective_seed}"))
    host.power.write_text("off\n")
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{spec.name}", "-f", str(host.host_key)])
    host.sshd_config.write_text(hostfs.sshd_config_text(host, record.address, paths.authorized_keys, spec.login_user))
    services = hostfs.boot_services(host, name, dist_packages, spec.login_user)
    host.boot_script.write_text(hostfs.boot_script_text(host, spec.name, dist_packages, spec.login_user, services))
    FreezerGroup(name).create()
    netns.create_host_network(name, name, bridge, address)
    return record


def _host_dist_packages() -> Path:
    """Where Debian's /usr/bin/python3 looks for site packages under /usr/local."""
    version = run(["/usr/bin/python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]).strip()
    return Path(f"/usr/local/lib/python{version}/dist-packages")


def _write_known_hosts(paths: FleetPaths, records: Sequence[HostRecord]) -> None:
    lines = []
    for record in records:
        key = paths.host(record.name).host_key.with_suffix(".pub").read_text().split()
        lines.append(f"{record.address} {key[0]} {key[1]}\n")
    paths.known_hosts.write_text("".join(lines))


def _start_hardware(paths: FleetPaths) -> ProcessRef:
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "LANG": "C.UTF-8",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    ref = spawn_detached([sys.executable, "-m", "reprofleet.sim.hardware", str(paths.root)],
                         log_path=paths.hardware_log, env=env)
    wait_until(lambda: paths.hardware_ready.exists() or not ref.alive(), 15.0, "the hardware daemon to start")
    if not ref.alive():
        raise SimError(f"the hardware daemon died at start; see {paths.hardware_log}")
    return ref
