"""The host side of runtime truth: the agent's ``runtime`` probe and the simulated docker's images."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reprofleet.sim import packages
from reprofleet.sim.rfsim import docker_cli, docker_images
from tests.support import paths

sys.path.insert(0, str(paths.REPO / "collectors"))
import runtime_probe  # noqa: E402

TAG = "vllm/vllm-openai:v0.25.1"


@pytest.fixture()
def hw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RFSIM_ETC", str(tmp_path / "etc"))
    monkeypatch.setenv("RFSIM_HW", str(tmp_path / "hw"))
    (tmp_path / "hw").mkdir()
    return tmp_path / "hw"


def docker(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = docker_cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


# --- the simulated docker ------------------------------------------------------------


def test_an_image_the_host_lacks_is_no_such_image_until_pulled(hw: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = docker(capsys, "image", "inspect", "--format", "{{.Id}}", TAG)
    assert (rc, out) == (1, "") and f"No such image: {TAG}" in err
    rc, out, _ = docker(capsys, "pull", TAG)
    published = docker_images.image_for(TAG, "1")
    assert rc == 0 and out.splitlines() == [
        "v0.25.1: Pulling from vllm/vllm-openai", f"Digest: {published['RepoDigests'][0].split('@')[1]}",
        f"Status: Downloaded newer image for {TAG}", f"docker.io/{TAG}"]
    assert docker(capsys, "image", "inspect", "--format", "{{.Id}}", TAG)[1] == published["Id"] + "\n"
    rc, out, _ = docker(capsys, "image", "inspect", "--format", "{{json .RepoDigests}}", TAG)
    assert json.loads(out) == published["RepoDigests"]
    rc, out, _ = docker(capsys, "image", "inspect", TAG)
    assert json.loads(out)[0]["Id"] == published["Id"]


def test_a_moved_tag_is_a_new_image_id_and_digest_on_the_host(hw: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docker(capsys, "pull", TAG)
    before = docker(capsys, "image", "inspect", "--format", "{{.Id}}", TAG)[1]
    rebuilt = docker_images.move_tag(TAG, "2", hw)
    after = docker(capsys, "image", "inspect", "--format", "{{.Id}}", TAG)[1]
    assert before != after == rebuilt["Id"] + "\n"
    assert docker(capsys, "pull", TAG)[1].splitlines()[2] == f"Status: Image is up to date for {TAG}"


def test_an_unknown_tag_cannot_be_pulled_and_a_bad_format_is_dockers_error(
        hw: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (hw / "docker").mkdir()
    (hw / "docker" / "registry.json").write_text(json.dumps({"lab/gone:1": None}))
    rc, _, err = docker(capsys, "pull", "lab/gone:1")
    assert rc == 1 and "manifest unknown" in err
    docker(capsys, "pull", TAG)
    rc, _, err = docker(capsys, "image", "inspect", "--format", "{{.Nope}}", TAG)
    assert rc == 1 and 'map has no entry for key "Nope"' in err


# --- the agent's probe -------------------------------------------------------------------


def test_the_probe_reads_versions_from_metadata_without_importing_vllm(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    packages.install_host_metadata(site, "0.26.0")
    (site / "vllm").mkdir()
    (site / "vllm" / "__init__.py").write_text("raise SystemExit('imported vllm')\n")  # importing it fails the probe
    monkeypatch.setenv("PYTHONPATH", str(site))
    line = runtime_probe.command(str(tmp_path / "state"), "python", json.dumps({"python": sys.executable}))
    assert line["ok"] is True and line["interpreter"]["path"] == sys.executable
    assert line["packages"] == {"vllm": "0.26.0", "torch": "2.9.1", "flashinfer": "0.5.3", "triton": "3.5.1"}


def test_a_missing_interpreter_is_a_failed_probe_that_says_why(tmp_path: Path) -> None:
    line = runtime_probe.command(str(tmp_path), "python", json.dumps({"python": str(tmp_path / "nope")}))
    assert line["ok"] is False and "nope" in line["error"]


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    packages.build_wheelhouse(folder, ("0.26.0",))
    return folder


def venv_settings(wheelhouse: Path, **more: Any) -> str:
    return json.dumps({"name": "vllm-0.26.0", "vllm": "0.26.0", "requirement": "vllm>=0.25",
                       "base_python": sys.executable, "no_index": True, "find_links": [str(wheelhouse)], **more})


def test_a_venv_is_built_once_and_a_half_built_one_is_rebuilt(tmp_path: Path, wheelhouse: Path) -> None:
    state = str(tmp_path / "state")
    first = runtime_probe.command(state, "venv", venv_settings(wheelhouse))
    assert first["ok"] is True and first["created"] is True, first.get("error")
    assert first["packages"] == {"vllm": "0.26.0", "torch": "2.9.1", "flashinfer": "0.5.3", "triton": "3.5.1"}
    marker = Path(first["venv"]) / runtime_probe.COMPLETE
    assert json.loads(marker.read_text())["settings"]["vllm"] == "0.26.0"
    again = runtime_probe.command(state, "venv", venv_settings(wheelhouse))
    assert again["ok"] is True and again["created"] is False
    marker.unlink()
    (Path(first["venv"]) / "leftover").write_text("from the interrupted build")
    rebuilt = runtime_probe.command(state, "venv", venv_settings(wheelhouse))
    assert rebuilt["created"] is True and not (Path(first["venv"]) / "leftover").exists()


def test_a_failed_install_leaves_no_venv_marked_complete(tmp_path: Path, wheelhouse: Path) -> None:
    state = str(tmp_path / "state")
    line = runtime_probe.command(state, "venv", venv_settings(wheelhouse, vllm="0.99.0", name="vllm-0.99.0"))
    assert line["ok"] is False and "pip" in line["error"]
    assert not os.path.exists(os.path.join(state, "venvs", "vllm-0.99.0", runtime_probe.COMPLETE))


def test_the_agent_answers_runtime_with_one_line_and_exit_1_when_not_ok(tmp_path: Path) -> None:
    agent = paths.REPO / "collectors" / "agent.py"

    def call(python: str) -> tuple[int, list[dict[str, Any]]]:
        done = subprocess.run([sys.executable, str(agent), "--state-dir", str(tmp_path), "runtime", "python",
                               "--json", json.dumps({"python": python})], capture_output=True, text=True, timeout=60)
        return done.returncode, [json.loads(line) for line in done.stdout.splitlines()]

    rc, lines = call(sys.executable)
    assert rc == 0 and [(line["k"], line["ok"]) for line in lines] == [("runtime", True)]
    rc, lines = call(str(tmp_path / "no-python"))
    assert rc == 1 and [(line["k"], line["ok"]) for line in lines] == [("runtime", False)]
