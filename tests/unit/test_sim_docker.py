"""The simulated host's docker: the seed's `docker run` line parsed as docker does, and the
daemon's side (records, filters, formats, kill, the init) as docker and tini answer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reprofleet.sim.rfsim import docker_init, docker_ps, docker_shim, docker_state
from reprofleet.sim.rfsim.docker_cli import DockerUsage, Mount, container_env, parse_mount, parse_run
from reprofleet.sim.rfsim.docker_run import HEADER

SEED = [
    "--rm", "--gpus", "all", "--ipc", "host",
    "--env", "HF_HUB_OFFLINE=1", "--env", "CUTE_DSL_ARCH=sm_120a", "-e", "VLLM_USE_FLASHINFER_SAMPLER=0",
    "--env=VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", "--env", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    "--mount", "type=bind,src=/root/sm120-poc-cache,dst=/root/.cache/vllm",
    "--mount", "type=bind,src=/root/poc.py,dst=/poc.py,readonly",
    "--entrypoint", "python3", "vllm/vllm-openai:v0.25.1", "/poc.py", "--spec-tokens", "9",
]


def test_the_seeds_command_line_parses_into_mounts_env_entrypoint_and_version() -> None:
    spec = parse_run(SEED, environ={})
    assert spec.image == "vllm/vllm-openai:v0.25.1" and spec.vllm_version == "0.25.1"
    assert spec.entrypoint == "python3" and spec.command == ("/poc.py", "--spec-tokens", "9")
    assert spec.remove and spec.gpus == "all" and spec.flags["--ipc"] == "host"
    assert dict(spec.env)["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert dict(spec.env)["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] == "1"
    assert spec.mounts == (Mount("/root/sm120-poc-cache", "/root/.cache/vllm"),
                           Mount("/root/poc.py", "/poc.py", readonly=True))


def test_the_container_environment_is_the_images_plus_the_flags_not_the_callers() -> None:
    spec = parse_run(["-e", "A=1", "-e", "FROM_CALLER", "img:v0.26.0", "true"], environ={"FROM_CALLER": "x", "SECRET": "y"})
    env = container_env(spec, "ab" * 32, "0.25.1")
    assert env["A"] == "1" and env["FROM_CALLER"] == "x" and "SECRET" not in env
    assert env["RFSIM_VLLM_VERSION"] == "0.26.0" and env["HOSTNAME"] == "abababababab"
    untagged = parse_run(["vllm/vllm-openai:latest", "true"], environ={})
    assert container_env(untagged, "cd" * 32, "0.25.1")["RFSIM_VLLM_VERSION"] == "0.25.1"


def test_mount_spellings_and_volumes() -> None:
    assert parse_mount("type=bind,source=/a,target=/b,ro") == Mount("/a", "/b", readonly=True)
    assert parse_mount("type=bind,src=/a,destination=/b,readonly=false") == Mount("/a", "/b")
    spec = parse_run(["-v", "/host/cache:/root/.cache/vllm:ro", "img", "true"], environ={})
    assert spec.mounts == (Mount("/host/cache", "/root/.cache/vllm", readonly=True, create=True),)


@pytest.mark.parametrize("argv, words", [
    (["--frobnicate", "img"], "unknown flag: --frobnicate"),
    (["--rm"], "requires at least 1 argument"),
    (["--mount", "type=volume,src=v,dst=/d", "img"], "only type=bind"),
    (["--mount", "type=bind,dst=/d", "img"], "source/target must not be empty"),
    (["--env"], "flag needs an argument"),
])
def test_bad_command_lines_are_refused(argv: list, words: str) -> None:
    with pytest.raises(DockerUsage, match=words):
        parse_run(argv, environ={})


def test_docker_version_and_usage_errors(sim_host_tree) -> None:
    tree = sim_host_tree()
    version = tree.run(["docker", "version", "--format", "{{.Server.Version}}"])
    assert version.returncode == 0 and version.stdout.strip() == "28.3.2"
    bad = tree.run(["docker", "run", "--frobnicate", "img"])
    assert bad.returncode == 125 and "unknown flag: --frobnicate" in bad.stderr
    missing = tree.run(["docker", "run", "--mount", "type=bind,src=/nonexistent/x,dst=/x", "img", "true"])
    assert missing.returncode == 125 and "bind source path does not exist: /nonexistent/x" in missing.stderr


# -- the daemon's side: containers that outlive their client -------------------------------

NOW = 1_700_000_000.0


def test_labels_init_detach_and_sig_proxy_parse_as_docker_reads_them() -> None:
    spec = parse_run(["--rm", "--init", "--name", "reprofleet-a1", "--label", "reprofleet.attempt=a1", "-l", "bare",
                      "--sig-proxy=false", "-d", "img", "true"], environ={})
    assert spec.labels == (("reprofleet.attempt", "a1"), ("bare", "")) and spec.name == "reprofleet-a1"
    assert spec.init and spec.detach and not spec.sig_proxy and spec.remove
    assert parse_run(["img", "true"], environ={}).sig_proxy  # on by default
    with pytest.raises(DockerUsage, match=r"Invalid container name \(-bad\)"):
        parse_run(["--name", "-bad", "img", "true"], environ={})
    with pytest.raises(DockerUsage, match="strconv.ParseBool"):
        parse_run(["--sig-proxy=maybe", "img", "true"], environ={})


@pytest.fixture
def daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty simulated daemon store in a temporary folder."""
    monkeypatch.setenv(docker_state.ROOT_ENV, str(tmp_path / "docker"))
    return tmp_path / "docker"


def record(name: str, labels: dict | None = None, **state: object) -> docker_state.Container:
    container = docker_state.create({"name": name, "image": "vllm/vllm-openai:v0.25.1", "labels": labels or {},
                                     "command": ["python3", "/poc.py", "--spec-tokens", "9"], "remove": False})
    if state:
        container.save_state(**state)
    return container


def running_record(name: str, labels: dict | None = None) -> docker_state.Container:
    """A record whose PID 1 is this test process (alive, with its real start time)."""
    me = os.getpid()
    container = record(name, labels, status="running", pid=me, pid_start=docker_state.start_time(me), started=NOW)
    return container


def test_a_second_container_under_a_name_in_use_is_a_conflict_naming_the_holder(daemon: Path) -> None:
    first = record("reprofleet-a1")
    with pytest.raises(docker_state.DaemonError) as caught:
        record("reprofleet-a1")
    assert str(caught.value) == (
        f'Conflict. The container name "/reprofleet-a1" is already in use by container "{first.id}". '
        "You have to remove (or rename) that container to be able to reuse that name.")
    assert len(first.id) == 64 and all(c in "0123456789abcdef" for c in first.id)


def test_containers_are_found_by_name_id_or_unique_prefix(daemon: Path) -> None:
    one, two = record("one"), record("two")
    assert docker_state.find("one").id == one.id and docker_state.find(two.id).name == "two"
    assert docker_state.find(two.id[:12]).name == "two"
    with pytest.raises(docker_state.DaemonError, match="No such container: three"):
        docker_state.find("three")


def test_a_container_of_an_earlier_boot_is_dead_and_a_removed_one_frees_its_name(daemon: Path) -> None:
    alive = running_record("alive")
    assert alive.running
    old = running_record("old-boot")
    old.config["boot_id"] = "00000000-0000-0000-0000-000000000000"
    docker_state.write_json(old.directory / docker_state.CONFIG, old.config)
    assert not docker_state.find("old-boot").running  # same pid, same start time, but another boot
    gone = running_record("gone-rm")
    gone.config.update(boot_id="11111111-1111-1111-1111-111111111111", remove=True)
    docker_state.write_json(gone.directory / docker_state.CONFIG, gone.config)
    with docker_state.daemon_lock():
        docker_state.housekeeping()
    assert docker_state.find("old-boot").state["exit_code"] == docker_state.LOST_EXIT
    assert docker_state.locate(gone.id) is not None  # in removed/: its name is free, its end still readable
    record("gone-rm")


def test_a_pid_that_now_names_another_process_is_not_the_container(daemon: Path) -> None:
    me = os.getpid()
    impostor = record("reused", status="running", pid=me, pid_start=(docker_state.start_time(me) or 0) + 1)
    assert not impostor.running


def test_filters_combine_as_dockers_do(daemon: Path) -> None:
    running_record("reprofleet-a1", {"reprofleet.attempt": "a1", "team": "gpu"})
    running_record("other", {"team": "gpu"})
    record("reprofleet-old", {"reprofleet.attempt": "a0"}, status="exited", exit_code=137, finished=NOW)

    def names(*args: str) -> list:
        return [c.name for c in docker_ps.listed(docker_ps.parse_ps(list(args)))]

    assert names("--filter", "label=reprofleet.attempt") == ["reprofleet-a1"]
    assert names("-a", "--filter", "label=reprofleet.attempt") == ["reprofleet-old", "reprofleet-a1"]
    assert names("--filter", "label=reprofleet.attempt=a1", "--filter", "label=team=gpu") == ["reprofleet-a1"]
    assert names("--filter", "label=reprofleet.attempt=a2") == []
    assert sorted(names("-f", "name=^/other$", "-f", "name=a1")) == ["other", "reprofleet-a1"]
    assert names("-a", "--filter=status=exited") == ["reprofleet-old"]
    with pytest.raises(docker_state.DaemonError, match="invalid filter 'colour'"):
        names("--filter", "colour=red")
    with pytest.raises(docker_ps.Usage, match="bad format of filter"):
        docker_ps.parse_ps(["--filter", "label"])


def test_formats_ids_labels_and_the_table(daemon: Path) -> None:
    container = running_record("reprofleet-a1", {"reprofleet.attempt": "a1", "b": "2"})
    container.config["created"] = NOW - 125
    opts = docker_ps.PsOptions(template='{{.ID}}|{{.Names}}|{{.Image}}|{{.Labels}}|{{.Label "reprofleet.attempt"}}'
                                        '|{{.Status}}|{{json .Labels}}')
    (line,) = docker_ps.format_listing([container], opts, now=NOW + 3)
    assert line == (f'{container.id[:12]}|reprofleet-a1|vllm/vllm-openai:v0.25.1|b=2,reprofleet.attempt=a1|a1'
                    '|Up 3 seconds|{"b":"2","reprofleet.attempt":"a1"}')
    assert docker_ps.format_listing([container], docker_ps.PsOptions(quiet=True)) == [container.id[:12]]
    assert docker_ps.format_listing([container], docker_ps.PsOptions(quiet=True, no_trunc=True)) == [container.id]
    header, row = docker_ps.format_listing([container], docker_ps.PsOptions(), now=NOW)
    assert header.split() == ["CONTAINER", "ID", "IMAGE", "COMMAND", "CREATED", "STATUS", "PORTS", "NAMES"]
    assert row.startswith(container.id[:12] + "   vllm/vllm-openai:v0.25.1   \"python3 /poc.py --s\u2026\"   "
                          "2 minutes ago   Up Less than a second   ")
    assert row.endswith("reprofleet-a1") and header.index("NAMES") == row.index("reprofleet-a1")
    table = docker_ps.format_listing([container], docker_ps.PsOptions(template="table {{.Names}}\\t{{.State}}"))
    assert table == ["NAMES           STATE", "reprofleet-a1   running"]
    with pytest.raises(docker_ps.Usage, match="can't evaluate field Colour"):
        docker_ps.format_listing([container], docker_ps.PsOptions(template="{{.Colour}}"))


@pytest.mark.parametrize("seconds, words", [
    (0.4, "Less than a second"), (1, "1 second"), (59, "59 seconds"), (61, "About a minute"),
    (600, "10 minutes"), (3600, "About an hour"), (7 * 3600, "7 hours"), (3 * 86400, "3 days"),
])
def test_durations_read_as_docker_ps_writes_them(seconds: float, words: str) -> None:
    assert docker_ps.human_duration(seconds) == words


def test_exited_status_and_kill_arguments() -> None:
    assert docker_ps.parse_signal("KILL") == docker_ps.parse_signal("sigkill") == docker_ps.parse_signal("9") == 9
    assert docker_ps.parse_signal("TERM") == signal.SIGTERM
    with pytest.raises(docker_state.DaemonError, match="Invalid signal: BOGUS"):
        docker_ps.parse_signal("BOGUS")
    parsed = docker_ps.parse_kill(["-s", "TERM", "a", "b"])
    assert parsed.signal_text == "TERM" and parsed.refs == ["a", "b"]
    assert docker_ps.parse_kill(["--signal=HUP", "x"]).signal_text == "HUP"
    with pytest.raises(docker_ps.Usage, match="requires at least 1 argument"):
        docker_ps.parse_kill(["-s", "KILL"])


def test_killing_a_stopped_or_unknown_container_says_so(daemon: Path) -> None:
    stopped = record("stopped", status="exited", exit_code=0, finished=NOW)
    with pytest.raises(docker_state.DaemonError) as caught:
        docker_ps.kill_one("stopped", signal.SIGKILL)
    assert str(caught.value) == f"cannot kill container: stopped: container {stopped.id} is not running"
    with pytest.raises(docker_state.DaemonError, match="^No such container: nobody$"):
        docker_ps.kill_one("nobody", signal.SIGKILL)


def test_output_frames_are_dockers_stdcopy() -> None:
    framed = docker_shim.frame(2, b"oops\n")
    assert framed[:8] == bytes([2, 0, 0, 0, 0, 0, 0, 5]) and HEADER.unpack_from(framed) == (2, 5)


def test_the_init_forwards_sigterm_to_its_child_and_exits_as_tini_does(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    child = f"import pathlib, time; pathlib.Path({str(ready)!r}).touch(); time.sleep(30)"
    init = subprocess.Popen([sys.executable, "-I", docker_init.__file__, "--", sys.executable, "-c", child])
    try:
        deadline = time.monotonic() + 10
        while not ready.exists() and time.monotonic() < deadline:  # until the child is up (evidence: its file)
            time.sleep(0.02)
        init.send_signal(signal.SIGTERM)
        assert init.wait(timeout=10) == 128 + signal.SIGTERM
    finally:
        init.kill()
    assert docker_init.exit_status(3 << 8) == 3 and docker_init.exit_status(signal.SIGKILL) == 137
    missing = subprocess.run([sys.executable, "-I", docker_init.__file__, "--", "/nonexistent/poc"],
                             capture_output=True, text=True, timeout=10)
    assert missing.returncode == 127 and "exec /nonexistent/poc failed" in missing.stderr


def test_docker_ps_and_kill_on_a_host_without_containers(sim_host_tree) -> None:
    tree = sim_host_tree()
    listing = tree.run(["docker", "ps", "-a"])
    assert listing.returncode == 0 and listing.stdout.split("\n")[0].startswith("CONTAINER ID   IMAGE")
    assert tree.run(["docker", "ps", "-q", "--filter", "label=reprofleet.attempt"]).stdout == ""
    missing = tree.run(["docker", "kill", "reprofleet-x"])
    assert missing.returncode == 1 and missing.stderr == "Error response from daemon: No such container: reprofleet-x\n"
    assert missing.stdout == ""


def test_an_env_file_is_read_when_the_client_starts_as_docker_reads_it(tmp_path: Path) -> None:
    env_file = tmp_path / "secrets.env"
    env_file.write_text("# a comment\n\nHF_TOKEN=hf-x=y\nFROM_CALLER\nMISSING\n")
    spec = parse_run(["--env-file", str(env_file), "-e", "A=1", "img:v0.26.0", "true"], environ={"FROM_CALLER": "c"})
    assert dict(spec.env) == {"HF_TOKEN": "hf-x=y", "FROM_CALLER": "c", "A": "1"}
    with pytest.raises(DockerUsage, match="open .*gone.env"):
        parse_run(["--env-file", str(tmp_path / "gone.env"), "img", "true"], environ={})
