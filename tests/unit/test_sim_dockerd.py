"""The simulated hosts' real docker: the nvidia runtime's spec edit, the daemon's boot lines,
and the image's merged-/usr layout (pure parts; the daemon itself: tests/fleet/test_fleet_docker.py)."""

from __future__ import annotations

import json
from pathlib import Path

from reprofleet.sim import dockerd, images
from reprofleet.sim.layout import HostPaths
from reprofleet.sim.rfsim import nvidia_runtime

HOOK = {"path": "/usr/local/bin/nvidia-container-runtime-hook", "args": ["nvidia-container-runtime-hook", "prestart"]}
OTHER_HOOK = {"path": "/usr/bin/other-hook"}


def spec(*env: str) -> dict:
    return {"process": {"env": ["PATH=/usr/bin", *env]}, "mounts": [{"destination": "/proc", "type": "proc"}],
            "hooks": {"prestart": [HOOK, OTHER_HOOK]}}


def test_a_container_that_asks_for_a_gpu_gets_the_hosts_gpu_files_and_loses_dockers_toolkit_hook() -> None:
    edited = nvidia_runtime.with_gpu(spec("NVIDIA_VISIBLE_DEVICES=0"))
    targets = {m["destination"]: m for m in edited["mounts"] if m["type"] == "bind"}
    assert "/etc/reprofleet-sim/hw" in targets or not Path("/etc/reprofleet-sim/hw").exists()
    assert targets["/etc/reprofleet-sim/host-proc"]["source"] == "/proc"
    assert "ro" in targets["/etc/reprofleet-sim/host-proc"]["options"]
    assert edited["hooks"]["prestart"] == [OTHER_HOOK]


def test_no_gpu_asked_none_or_void_leaves_the_spec_as_runc_would_run_it() -> None:
    for env in ((), ("NVIDIA_VISIBLE_DEVICES=none",), ("NVIDIA_VISIBLE_DEVICES=void",), ("NVIDIA_VISIBLE_DEVICES=",)):
        original = spec(*env)
        assert nvidia_runtime.with_gpu(original) is original


def test_the_runtime_edits_the_bundle_of_create_only(tmp_path: Path) -> None:
    argv = ["--root", "/run/x", "--log", "/l.json", "create", "--bundle", str(tmp_path), "--pid-file", "p", "c1"]
    assert nvidia_runtime.bundle_of(argv) == tmp_path
    assert nvidia_runtime.bundle_of(["create", f"--bundle={tmp_path}", "c1"]) == tmp_path
    assert nvidia_runtime.bundle_of(["--root", "/run/x", "start", "c1"]) is None
    assert nvidia_runtime.bundle_of(["delete", "--force", "c1"]) is None


def test_the_daemon_starts_in_the_hosts_cgroup_with_its_own_roots_and_no_iptables() -> None:
    paths = HostPaths(Path("/var/lib/reprofleet-sim/abc123/hosts/h1"))
    site = Path("/usr/local/lib/python3/dist-packages")
    lines = dockerd.boot_lines(paths, "rfsabc123-0", "rfsabc123-0", site)
    (start,) = [line for line in lines if str(dockerd.DOCKERD) in line]
    for flag in ("--iptables=false", "--bridge=none", "--cgroup-parent /rfsabc123-0/docker",
                 f"--data-root {paths.docker / 'data'}", "--exec-root /run/reprofleet-sim/dockerd/rfsabc123-0",
                 "-H fd://", f"--config-file {paths.docker_config}"):
        assert flag in start
    # docker.socket first, owned by root only; dockerd handed it; boot.sh goes on to become sshd at once
    assert "-m rfsim.docker_socket /run/reprofleet-sim/dockerd/rfsabc123-0.sock '' -- /usr/sbin/dockerd" in start
    assert start == lines[-1] and not any("while" in line for line in lines)  # sshd does not wait for dockerd
    assert json.loads(json.dumps(dockerd.daemon_config()))["default-runtime"] == "nvidia"
    wrapper = dockerd.client_wrapper_text("rfsabc123-0")
    assert "DOCKER_HOST=unix:///run/reprofleet-sim/dockerd/rfsabc123-0.sock" in wrapper
    lab = [line for line in dockerd.boot_lines(paths, "rfsabc123-0", "rfsabc123-0", site, "lab") if "docker_socket" in line]
    assert "rfsabc123-0.sock lab -- " in lab[0]  # a login that is not root: the socket's group, the docker group's part


def test_the_image_is_merged_usr_as_debian_12_is() -> None:
    assert images.image_path(Path("/lib/x86_64-linux-gnu/libc.so.6")) == "usr/lib/x86_64-linux-gnu/libc.so.6"
    assert images.image_path(Path("/lib64/ld-linux-x86-64.so.2")) == "usr/lib64/ld-linux-x86-64.so.2"
    assert images.image_path(Path("/usr/bin/python3.11")) == "usr/bin/python3.11"
    assert images.image_path(Path("/etc/ld.so.conf")) == "etc/ld.so.conf"
    assert images.image_tag("0.25.1") == "vllm/vllm-openai:v0.25.1"
