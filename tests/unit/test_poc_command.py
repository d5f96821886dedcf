"""The PoC's command line on a host, for docker and for a host Python."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from reprofleet.remote import host_commands
from reprofleet.runner import cache_sync, poc
from tests.support import paths
from reprofleet.model import Cell, Runtime, RuntimeKind

sys.path.insert(0, str(paths.REPO / "collectors"))
import cache_store  # noqa: E402


def _cell(runtime: Runtime) -> Cell:
    return Cell(
        name="spec-8", index=0, factors={},
        env=(("CUDA_LAUNCH_BLOCKING", "1"), ("HF_HUB_OFFLINE", "1")),
        args=(("enforce_eager", True), ("gpu_memory_utilization", 0.87), ("moe_backend", None), ("spec_tokens", 8)),
        runtime=runtime,
    )


def test_docker_runtime_mounts_cache_and_poc_like_the_seed() -> None:
    cell = _cell(Runtime(RuntimeKind.DOCKER, image="vllm/vllm-openai:v0.25.1", docker_args=("--ipc", "host")))
    command = poc.build(cell, poc_path="/root/p.py", state_root="/root/.cache/reprofleet",
                        attempt_id="a1", persistent=True, gpu=1)
    argv = list(command.argv)
    assert argv[:3] == ["docker", "run", "--rm"]
    assert argv[8:12] == ["--gpus", "device=1", "--ipc", "host"]
    assert "--env" in argv and "CUDA_LAUNCH_BLOCKING=1" in argv
    assert f"type=bind,src={command.cache_dir},dst=/root/.cache/vllm" in argv
    assert "type=bind,src=/root/p.py,dst=/poc.py,readonly" in argv
    image_at = argv.index("vllm/vllm-openai:v0.25.1")
    assert argv[image_at - 2:image_at] == ["--entrypoint", "python3"]
    assert argv[image_at + 1:] == ["/poc.py", "--enforce-eager", "--gpu-memory-utilization", "0.87",
                                   "--spec-tokens", "8"]
    assert command.env == ()


def test_persistent_cache_is_shared_per_runtime_and_fresh_cache_per_attempt() -> None:
    a = _cell(Runtime(RuntimeKind.DOCKER, image="vllm/vllm-openai:v0.25.1"))
    b = _cell(Runtime(RuntimeKind.DOCKER, image="vllm/vllm-openai:v0.26.0"))
    kw = dict(poc_path="/p.py", state_root="/s", persistent=True, gpu=0)
    assert poc.build(a, attempt_id="x", **kw).cache_dir == poc.build(a, attempt_id="y", **kw).cache_dir
    assert poc.build(a, attempt_id="x", **kw).cache_dir != poc.build(b, attempt_id="x", **kw).cache_dir
    fresh = poc.build(a, attempt_id="x", poc_path="/p.py", state_root="/s", persistent=False, gpu=0)
    assert fresh.cache_dir.endswith("fresh-x")


def test_python_runtime_passes_env_and_cache_root() -> None:
    cell = _cell(Runtime(RuntimeKind.PYTHON, python="/opt/vllm/bin/python"))
    command = poc.build(cell, poc_path="/p.py", state_root="/s", attempt_id="a", persistent=True, gpu=2)
    assert command.argv[:2] == ("/opt/vllm/bin/python", "/p.py")
    env = dict(command.env)
    assert env["CUDA_VISIBLE_DEVICES"] == "2" and env["VLLM_CACHE_ROOT"] == command.cache_dir
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # the index counts cards as NVML does


def test_a_docker_attempt_runs_in_a_named_labelled_container_with_an_init() -> None:
    cell = _cell(Runtime(RuntimeKind.DOCKER, image="vllm/vllm-openai:v0.26.0"))
    command = poc.build(cell, poc_path="/p.py", state_root="/s", attempt_id="0b9e-41", persistent=True, gpu=1)
    argv = list(command.argv)
    assert command.container == "reprofleet-0b9e-41"
    assert argv[argv.index("--name") + 1] == "reprofleet-0b9e-41"
    assert argv[argv.index("--label") + 1] == "reprofleet.attempt=0b9e-41"
    assert "--init" in argv and argv.index("--init") < argv.index("vllm/vllm-openai:v0.26.0")


def test_the_starting_cache_archive_is_reproducible(tmp_path) -> None:
    import io
    import os
    import tarfile

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.bin").write_bytes(b"1" * 100)
    (tmp_path / "b.json").write_text("{}")
    first, digest = poc.cache_seed_archive(str(tmp_path))
    os.utime(tmp_path / "b.json", (1, 1))
    again, digest_again = poc.cache_seed_archive(str(tmp_path))
    assert digest == digest_again and first == again
    with tarfile.open(fileobj=io.BytesIO(first)) as archive:
        assert sorted(archive.getnames()) == ["a/x.bin", "b.json"]


def test_the_starting_cache_refuses_a_symlink_as_the_seeded_snapshot_does(tmp_path) -> None:
    from reprofleet.runner.cache_sync import CacheError, build_snapshot

    (tmp_path / "good.bin").write_bytes(b"1")
    (tmp_path / "link").symlink_to("/etc/hostname")
    for pack in (poc.cache_seed_archive, build_snapshot):
        with pytest.raises(CacheError, match="link is not a regular file"):
            pack(str(tmp_path))


def test_the_starting_cache_refuses_a_fifo_and_a_linked_folder(tmp_path) -> None:
    import os

    from reprofleet.runner.cache_sync import CacheError

    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "pipe")
    with pytest.raises(CacheError, match="pipe is not a regular file"):
        poc.cache_seed_archive(str(tmp_path / "fifo"))
    (tmp_path / "dirlink").mkdir()
    (tmp_path / "dirlink" / "etc").symlink_to("/etc", target_is_directory=True)
    with pytest.raises(CacheError, match="etc is not a regular file"):
        poc.cache_seed_archive(str(tmp_path / "dirlink"))


def test_the_starting_cache_keeps_permission_bits_only(tmp_path) -> None:
    import io
    import os
    import tarfile

    (tmp_path / "tool").write_bytes(b"#!/bin/sh\n")
    os.chmod(tmp_path / "tool", 0o4755)
    archive, _ = poc.cache_seed_archive(str(tmp_path))
    with tarfile.open(fileobj=io.BytesIO(archive)) as unpacked:
        assert unpacked.getmember("tool").mode == 0o755


def test_a_cache_folder_with_a_quote_in_it_stays_one_word_on_the_shell_line(tmp_path) -> None:
    import subprocess

    (tmp_path / "seed").mkdir()
    (tmp_path / "seed" / "graph.py").write_text("print(1)\n")
    archive, _ = poc.cache_seed_archive(str(tmp_path / "seed"))
    home = tmp_path / "o'brien; touch owned; '"
    home.mkdir()
    (home / "seed.tar.gz").write_bytes(archive)
    plain, seeded = home / "plain", home / "seeded"
    for line in (host_commands.prepare_cache(str(plain), None).command,
                 host_commands.prepare_cache(str(seeded), str(home / "seed.tar.gz")).command):
        done = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
    assert plain.is_dir() and (seeded / "graph.py").read_text() == "print(1)\n"
    assert not (tmp_path / "owned").exists()


def test_seeding_never_overwrites_a_warm_cache() -> None:
    command = host_commands.prepare_cache("/c/key", "/s/seed.tar.gz").command
    assert command.startswith("mkdir -p /c/key && if [ -z \"$(ls -A /c/key)\" ]; then tar -xzf /s/seed.tar.gz")


ENGINE_ROOTS = ("FLASHINFER_AUTOTUNE_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE", "TRITON_CACHE_DIR")


def _docker_env(argv: tuple[str, ...]) -> dict[str, str]:
    pairs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--env" and "=" in argv[i + 1]]
    return dict(pair.split("=", 1) for pair in pairs)


@pytest.mark.parametrize("mode", ["persistent", "fresh", "seeded"])
def test_every_engine_cache_root_lies_in_the_cache_a_docker_attempt_mounts(mode: str) -> None:
    """FlashInfer's managed autotune store, its JIT kernels and Triton's cache default to folders
    outside VLLM_CACHE_ROOT (~/.cache/flashinfer, ~/.triton): each is pointed into the mount."""
    cell = _cell(Runtime(RuntimeKind.DOCKER, image="vllm/vllm-openai:v0.34.0"))
    command = poc.build(cell, poc_path="/p.py", state_root="/s", attempt_id="a1", persistent=mode == "persistent",
                        seeded=mode == "seeded", gpu=0)
    env = _docker_env(command.argv)
    assert f"type=bind,src={command.cache_dir},dst={poc.CONTAINER_CACHE}" in command.argv
    assert env["FLASHINFER_AUTOTUNE_CACHE_DIR"] == "/root/.cache/vllm/flashinfer_autotune"
    assert all(env[name].startswith(poc.CONTAINER_CACHE + "/") for name in ENGINE_ROOTS)
    assert len({env[name] for name in ENGINE_ROOTS}) == len(ENGINE_ROOTS)


@pytest.mark.parametrize("kind", [RuntimeKind.PYTHON, RuntimeKind.VENV])
@pytest.mark.parametrize("mode", ["persistent", "fresh", "seeded"])
def test_every_engine_cache_root_lies_in_the_attempts_cache_folder_on_a_host_python(kind: RuntimeKind,
                                                                                      mode: str) -> None:
    runtime = (Runtime(kind, python="/opt/vllm/bin/python") if kind is RuntimeKind.PYTHON
               else Runtime(kind, vllm="0.34.0"))
    command = poc.build(_cell(runtime), poc_path="/p.py", state_root="/s", attempt_id="a1",
                        persistent=mode == "persistent", seeded=mode == "seeded", gpu=0)
    env = dict(command.env)
    assert env["VLLM_CACHE_ROOT"] == command.cache_dir
    assert env["FLASHINFER_AUTOTUNE_CACHE_DIR"] == command.cache_dir + "/flashinfer_autotune"
    assert all(env[name].startswith(command.cache_dir + "/") for name in ENGINE_ROOTS)


def test_a_cells_own_cache_root_setting_wins_over_the_default() -> None:
    cell = Cell(name="own", index=0, factors={}, env=(("TRITON_CACHE_DIR", "/scratch/triton"),), args=(),
                runtime=Runtime(RuntimeKind.DOCKER, image="vllm/vllm-openai:v0.34.0"))
    docker = _docker_env(poc.build(cell, poc_path="/p.py", state_root="/s", attempt_id="a", persistent=True,
                                   gpu=0).argv)
    assert docker["TRITON_CACHE_DIR"] == "/scratch/triton"
    assert list(poc.build(cell, poc_path="/p.py", state_root="/s", attempt_id="a", persistent=True,
                          gpu=0).argv).count("TRITON_CACHE_DIR=/scratch/triton") == 1


def test_the_cache_manifest_shows_what_the_engine_wrote_under_every_root(tmp_path: Path) -> None:
    """What an attempt leaves under each root is in the cache folder, so the manifest a seeded
    push sends (cache_sync.build_snapshot) and the one a harvest pulls (the agent's
    folder_manifest) both list it."""
    cell = _cell(Runtime(RuntimeKind.PYTHON, python="/opt/vllm/bin/python"))
    command = poc.build(cell, poc_path="/p.py", state_root=str(tmp_path), attempt_id="a", persistent=True, gpu=0)
    env = dict(command.env)
    written = {"VLLM_CACHE_ROOT": "torch_compile_cache/3f1a/rank_0_0/backbone/cache_key",
               "FLASHINFER_AUTOTUNE_CACHE_DIR": "v2/5c0e/fp4_gemm.json",
               "FLASHINFER_WORKSPACE_BASE": ".cache/flashinfer/0.7.3/120a/cached_ops/fused_moe/fused_moe.so",
               "TRITON_CACHE_DIR": "Q2ZK/triton_poi_fused.cubin"}
    for name, relative in written.items():
        path = Path(env[name]) / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)
    seeded = {entry.path for entry in cache_sync.build_snapshot(command.cache_dir).files}
    harvested = {entry["path"] for entry in cache_store.folder_manifest(command.cache_dir)["files"]}
    expected = {str(Path(env[name], relative).relative_to(command.cache_dir)) for name, relative in written.items()}
    assert seeded == harvested == expected
    assert "flashinfer_autotune/v2/5c0e/fp4_gemm.json" in expected
