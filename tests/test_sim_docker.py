"""The simulated host's docker: the seed's `docker run` line, parsed as docker does."""

from __future__ import annotations

import pytest

from reprofleet.sim.rfsim.docker_cli import DockerUsage, Mount, container_env, parse_mount, parse_run

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
