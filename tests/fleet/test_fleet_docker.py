"""Docker containers outlive their client, on a simulated host over real SSH, and the agent
and the controller still leave nothing on the GPU.

Each simulated host runs Debian's real ``dockerd`` (sim/dockerd.py): a container is the
daemon's, so SIGKILL of the ``docker run`` client leaves it running, PID 1 ignores a SIGTERM
it has no handler for, ``--init`` passes it on, a name in use is refused. The daemon's
containers live in the host's freezer cgroup (a wedge freezes them) and die with the host,
whose next boot starts the daemon again. The agent docker-kills an attempt's container at its
end, ``kill --id`` reaches one whose supervisor is dead, and a campaign whose attempt times
out, or that finds an orphaned container, leaves no container behind.

One fleet for the module; each test has a host of its own in it.
"""

from __future__ import annotations

import re
import shlex
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_log_lines, read_stream
from reprofleet.remote.agent import AgentClient, load_bundle
from reprofleet.remote.transport import TransportSettings, connect
from reprofleet.runner.poc import ATTEMPT_LABEL, container_name
from reprofleet.runner.recovery import recovery_factory
from reprofleet.sim.procs import wait_until
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import settings_for, write_playbook

pytestmark = pytest.mark.fleet

IMAGE = "vllm/vllm-openai:v0.25.1"
QUIET = dict(p_wedge=0.0, p_error=0.0, p_hang=0.0, p_reboot=0.0, time_scale=0.02, boot_delay_s=0.3)
SPECS = (SimHostSpec(name="dk-kill", **QUIET), SimHostSpec(name="dk-init", **QUIET),
         SimHostSpec(name="dk-name", **QUIET), SimHostSpec(name="dk-agent", **QUIET),
         SimHostSpec(name="dk-hang", script=("hang",), hang_ignores_sigterm=True, **QUIET),
         SimHostSpec(name="dk-orph", script=("clean",), **QUIET), SimHostSpec(name="dk-frz", **QUIET))
# a container's program: says it is up, answers SIGUSR1, sleeps; its last argument marks its processes
CLIENT = "/usr/bin/docker"  # what the host's docker wrapper execs: the real client
SLEEPER = ("import signal, sys, time; signal.signal(signal.SIGUSR1, lambda *a: print('usr1', flush=True)); "
           "print('up', flush=True); time.sleep(120)")


@pytest.fixture(scope="module")
def docker_fleet(sim_ready: None) -> Iterator[Any]:
    from reprofleet.sim import Fleet

    fleet = Fleet.up(SPECS)
    try:
        yield fleet
    finally:
        fleet.down(remove_files=True)


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def container_processes(host: Any, marker: str) -> list[int]:
    """The host's processes running a container's program (not the docker client's line): in
    the containers' cgroups, below the host's own."""
    return [pid for pid in host.cgroup.tree_pids() if marker in cmdline(pid) and "docker run" not in cmdline(pid)]


def client_pid(host: Any, name: str) -> int:
    found = [pid for pid in host.cgroup.pids() if f"{CLIENT} run" in cmdline(pid)
             and f"--name {name} " in cmdline(pid)]
    assert len(found) == 1, found
    return found[0]


def start_client(host: Any, name: str, flags: str) -> None:
    """``docker run`` in the background on the host, in a session and process group of its
    own (as the agent starts a PoC), its output and exit status in /tmp."""
    run = f"docker run {flags} --name {name} {IMAGE} python3 -c {shlex.quote(SLEEPER)} {name}-program"
    line = f"{run} > /tmp/{name}.out 2>&1; echo rc=$? > /tmp/{name}.rc"
    assert host.ssh(f"setsid -f sh -c {shlex.quote(line)} < /dev/null > /dev/null 2>&1").returncode == 0


def process_group(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])


def gone(pid: int) -> bool:
    """No such process, or a zombie (nothing of it runs)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def host_file(host: Any, name: str) -> str:
    path = host.paths.fs("tmp") / name
    return path.read_text() if path.exists() else ""


def docker_ps(host: Any, *args: str) -> list[str]:
    result = host.ssh("docker ps " + " ".join(shlex.quote(a) for a in args))
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def wait_gone(host: Any, label: str = ATTEMPT_LABEL) -> None:
    """Until ``docker ps -a`` lists no container with the label (a --rm removal follows the end)."""
    wait_until(lambda: docker_ps(host, "-a", "-q", "--filter", f"label={label}") == [], 10,
               f"no container labelled {label} on {host.name}", interval_s=0.1)


def test_every_daemon_starts_with_the_fleets_images_under_one_id_each_and_an_engine_id_of_its_own(
        docker_fleet) -> None:
    """The hosts' data roots are filled from one image store before their first boot
    (sim/image_store.py): each daemon lists the images the playbooks name, one image id a tag on
    every host and no repo digest (imported, as `docker load` left them), and is a daemon of its
    own (its engine id is not the store's)."""
    listings, engine_ids = set(), set()
    for host in docker_fleet.hosts:
        listed = host.ssh("docker images --no-trunc --format '{{.Repository}}:{{.Tag}} {{.ID}} {{.Digest}}' "
                          "--filter reference='vllm/vllm-openai:*'; docker info --format '{{.ID}}'")
        assert listed.returncode == 0, listed.stderr
        *images, engine = listed.stdout.splitlines()
        listings.add(tuple(sorted(images)))
        engine_ids.add(engine)
    assert len(listings) == 1  # the same tags, the same ids, on every host
    (images,) = listings
    assert {line.split()[0] for line in images} >= {f"vllm/vllm-openai:v{v}" for v in ("0.24.0", "0.25.1", "0.26.0")}
    assert all(line.split()[1].startswith("sha256:") and line.split()[2] == "<none>" for line in images)
    assert len(engine_ids) == len(docker_fleet.hosts)


def test_sigkill_of_the_docker_run_client_leaves_the_container_running_until_docker_kill(docker_fleet) -> None:
    host = docker_fleet.host("dk-kill")
    name = "reprofleet-k1"
    start_client(host, name, f"--rm --init --label {ATTEMPT_LABEL}=k1")
    wait_until(lambda: "up" in host_file(host, f"{name}.out"), 20, "the container to say it is up")
    client = client_pid(host, name)
    group = process_group(client)
    assert group != process_group(container_processes(host, f"{name}-program")[0])
    assert host.ssh(f"kill -KILL -- -{group}").returncode == 0  # the client's whole group, as the agent's timeout does
    wait_until(lambda: gone(client), 10, "the client to die of SIGKILL")
    assert docker_ps(host, "--filter", f"label={ATTEMPT_LABEL}",
                     "--format", '{{.Names}} {{.Label "reprofleet.attempt"}} {{.State}}') == [f"{name} k1 running"]
    assert container_processes(host, f"{name}-program")  # still on the host, its client gone
    killed = host.ssh(f"docker kill {name}")
    assert killed.returncode == 0 and killed.stdout == f"{name}\n"
    wait_gone(host)
    assert container_processes(host, f"{name}-program") == []


def test_pid_1_ignores_the_sigterm_its_client_proxies_unless_the_init_passes_it_on(docker_fleet) -> None:
    host = docker_fleet.host("dk-init")
    bare, inited = "reprofleet-i1", "reprofleet-i2"
    start_client(host, bare, f"--rm --label {ATTEMPT_LABEL}=i1")
    start_client(host, inited, f"--rm --init --label {ATTEMPT_LABEL}=i2")
    wait_until(lambda: all("up" in host_file(host, f"{n}.out") for n in (bare, inited)), 20, "both containers up")
    # TERM then USR1, in that order, through the client: PID 1 has a handler for USR1 only
    assert host.ssh(f"kill -TERM {client_pid(host, bare)}; kill -USR1 {client_pid(host, bare)}").returncode == 0
    wait_until(lambda: "usr1" in host_file(host, f"{bare}.out"), 10, "the USR1 proxied after the TERM")
    assert docker_ps(host, "--filter", f"name={bare}", "--format", "{{.State}}") == ["running"]
    assert host_file(host, f"{bare}.rc") == ""  # the client is still attached
    assert host.ssh(f"kill -TERM {client_pid(host, inited)}").returncode == 0
    wait_until(lambda: host_file(host, f"{inited}.rc") != "", 10, "the --init container to end on SIGTERM")
    assert host_file(host, f"{inited}.rc") == "rc=143\n"  # tini's 128 + SIGTERM, as docker run returns it
    assert host.ssh(f"docker kill {bare}").returncode == 0
    wait_until(lambda: host_file(host, f"{bare}.rc") != "", 10, "the bare container's client to exit")
    assert host_file(host, f"{bare}.rc") == "rc=137\n"  # the client exits with its container's code
    wait_gone(host)


def test_a_second_docker_run_under_a_name_in_use_is_refused_with_125(docker_fleet) -> None:
    host = docker_fleet.host("dk-name")
    name = "reprofleet-n1"
    first = host.ssh(f"docker run -d --name {name} --label {ATTEMPT_LABEL}=n1 {IMAGE} python3 -c "
                     f"{shlex.quote(SLEEPER)}")
    holder = first.stdout.strip()
    assert first.returncode == 0 and re.fullmatch(r"[0-9a-f]{64}", holder), first.stdout + first.stderr
    second = host.ssh(f"docker run --rm --name {name} {IMAGE} true")
    assert second.returncode == 125 and second.stdout == ""
    assert second.stderr == (
        f'docker: Error response from daemon: Conflict. The container name "/{name}" is already in use by '
        f'container "{holder}". You have to remove (or rename) that container to be able to reuse that name.\n'
        "See 'docker run --help'.\n")
    assert docker_ps(host, "-q", "--no-trunc", "--filter", f"name={name}") == [holder]
    assert host.ssh(f"docker kill {name}").returncode == 0
    wait_until(lambda: docker_ps(host, "-q", "--filter", f"name={name}") == [], 10, "the container to stop")
    # without --rm the exited container keeps its name, as docker's does
    assert docker_ps(host, "-a", "--filter", f"name={name}", "--format", "{{.Status}}")[0].startswith("Exited (137)")
    assert host.ssh(f"docker run --rm --name {name} {IMAGE} true").returncode == 125
    stopped = host.ssh(f"docker kill {name}")
    # docker 20.10 says "Cannot kill container: ...: Container ...", newer daemons lower-case both;
    # the agent's containers.GONE reads "is not running" in either
    assert stopped.returncode == 1 and re.fullmatch(
        f"Error response from daemon: [Cc]annot kill container: {name}: [Cc]ontainer {holder} is not running\n",
        stopped.stderr), stopped.stderr


def agent_for(fleet: Any, name: str, tmp_path: Path) -> tuple[Any, AgentClient]:
    inventory = fleet.write_inventory(tmp_path / f"inventory-{name}.yml", hosts=[name])
    host = load_inventory(inventory).hosts[0]
    session = connect(host, TransportSettings(known_hosts=Path(fleet.known_hosts_path)))
    agent = AgentClient(session, load_bundle(), host.python)
    agent.push()
    return session, agent


def orphan_container(fleet: Any, host: Any, agent: AgentClient, attempt_id: str) -> str:
    """An attempt whose supervisor and docker client were SIGKILLed: only its container is left."""
    name = container_name(attempt_id)
    argv = ["docker", "run", "--rm", "--init", "--name", name, "--label", f"{ATTEMPT_LABEL}={attempt_id}", IMAGE,
            "python3", "-c", SLEEPER, f"{name}-program"]
    stream = agent.run(attempt_id, argv, timeout=120, container=name, sample_hz=0)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        event = stream.next_event(1.0)
        if event is not None and event.data.get("line") == "up":
            break
    else:
        raise AssertionError("the container never said it was up")
    stream.close()
    supervisor = int((host.paths.fs("root") / ".cache/reprofleet/attempts" / attempt_id / "supervisor.pid").read_text())
    assert host.ssh(f"kill -KILL {supervisor} {client_pid(host, name)}").returncode == 0
    wait_until(lambda: not any(f"_supervise --id {attempt_id}" in cmdline(p) for p in host.cgroup.pids())
               and not any(f"{CLIENT} run" in cmdline(p) for p in host.cgroup.pids()),
               10, "the supervisor and the client to die")
    assert docker_ps(host, "--filter", f"label={ATTEMPT_LABEL}={attempt_id}", "--format", "{{.Names}}") == [name]
    return name


def test_kill_reaches_the_container_of_an_attempt_whose_supervisor_and_client_are_dead(
        docker_fleet, tmp_path: Path) -> None:
    host = docker_fleet.host("dk-agent")
    session, agent = agent_for(docker_fleet, "dk-agent", tmp_path)
    try:
        name = orphan_container(docker_fleet, host, agent, "ag-1")
        (listed,) = agent.attempts(running_only=True)
        assert (listed.id, listed.status, listed.container, listed.supervisor_alive) == ("ag-1", "running", name, False)
        reply = agent.kill("ag-1")
        assert reply.was_running and reply.container == name and reply.container_killed
        wait_gone(host)
        assert container_processes(host, f"{name}-program") == [] and agent.attempts(running_only=True) == ()
    finally:
        session.close()


def run(fleet: Any, book: Path, reports: Path, host_name: str, tmp_path: Path) -> Any:
    inventory = fleet.write_inventory(tmp_path / f"campaign-{host_name}.yml", hosts=[host_name])
    plan = make_plan(load_playbook(book), load_inventory(inventory).hosts)
    return run_campaign(plan, settings_for(fleet), reports, recovery_factory=recovery_factory)


def test_an_attempt_that_times_out_with_its_poc_deaf_to_sigterm_leaves_no_container(docker_fleet, tmp_path: Path) -> None:
    host = docker_fleet.host("dk-hang")
    book = write_playbook(tmp_path, attempts=1, attempt_timeout=6)  # a real container takes ~1-2 s to start
    result = run(docker_fleet, book, tmp_path / "reports", "dk-hang", tmp_path)
    (record,) = result.records
    assert record["outcome"] == "hang"
    end = read_stream(result.directory.root / record["stream"])[-1]
    # SIGTERM went through the client and the init to a PoC stuck in the driver; SIGKILL ended the
    # client only; the agent's docker kill ended the container
    assert end["k"] == "exit" and end["timed_out"] is True and end["signal"] == 9
    assert end["container"] == container_name(record["attempt"]) and end["container_killed"] is True
    wait_gone(host)
    assert docker_ps(host, "-a", "-q") == []


def test_a_campaign_kills_a_container_its_dead_controller_left_running(docker_fleet, tmp_path: Path) -> None:
    host = docker_fleet.host("dk-orph")
    session, agent = agent_for(docker_fleet, "dk-orph", tmp_path)
    try:
        name = orphan_container(docker_fleet, host, agent, "orph-1")
    finally:
        session.close()
    book = write_playbook(tmp_path, attempts=1, attempt_timeout=30)
    result = run(docker_fleet, book, tmp_path / "reports", "dk-orph", tmp_path)
    killed = [e for e in read_log_lines(result.directory.events) if e.get("event") == "orphan_killed"]
    assert [(e["attempt"], e["container"], e["container_killed"]) for e in killed] == [("orph-1", name, True)]
    (record,) = result.records
    assert record["outcome"] == "clean"  # the slot ran on a GPU nothing else held
    end = read_stream(result.directory.root / record["stream"])[-1]
    assert end["container_killed"] is False  # its own --rm container was gone when the PoC exited
    wait_gone(host)
    assert docker_ps(host, "-a", "-q") == []


def freezer_group(pid: int) -> Path:
    """The freezer cgroup a process is in, as a folder of the machine's hierarchy."""
    line = next(row for row in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if ":freezer:" in row)
    return Path("/sys/fs/cgroup/freezer") / line.split(":", 2)[2].lstrip("/")


def test_a_frozen_host_freezes_its_containers_and_a_power_cycle_ends_them_and_restarts_the_daemon(docker_fleet) -> None:
    host = docker_fleet.host("dk-frz")
    name = "reprofleet-f1"
    pidfile = Path(f"/run/reprofleet-sim/dockerd/{host.record.netns}/dockerd.pid")  # its --exec-root
    daemon = int(pidfile.read_text())
    assert daemon in host.cgroup.pids()  # the daemon is one of the host's processes
    start_client(host, name, f"--rm --init --label {ATTEMPT_LABEL}=f1")
    wait_until(lambda: "up" in host_file(host, f"{name}.out"), 20, "the container to say it is up")
    (program,) = [p for p in container_processes(host, f"{name}-program") if cmdline(p).startswith("python3 ")]
    group = freezer_group(program)
    assert group.parent == host.cgroup.path / "docker"  # dockerd's --cgroup-parent: inside the host's group
    host.freeze()
    assert (group / "freezer.state").read_text().strip() == "FROZEN"  # the container stopped with its host
    old_boot = host.boot_id
    host.power_cycle()
    assert gone(program) and gone(daemon)
    assert host.boot_id != old_boot and not group.exists()  # its cgroup went with the "machine"
    listed = host.ssh("docker ps -a --format '{{.Names}} {{.State}}'")  # answered by the new boot's daemon
    assert listed.returncode == 0 and name not in listed.stdout and "running" not in listed.stdout
    new_daemon = int(pidfile.read_text())
    assert new_daemon != daemon and new_daemon in host.cgroup.pids()
