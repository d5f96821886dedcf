"""Runtime truth on the simulated fleet (issue 12, item 1): what ran is recorded, not named.

One fleet of two hosts for the module, each with its own real dockerd (sim/dockerd.py) and
the images the fleet built offline and loaded (sim/images.py: imported, so no repo digest),
and two campaigns of the same playbook (docker, python and venv cells, a docker cell whose
container is OOM-killed, and one whose image no host has and no registry can be reached
for). In the first, the docker tag is moved to a rebuilt image on rt-a right after that
cell's first record there; the second runs after it, with rt-b's venv left half-built on purpose.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.records.identity import record_cell_id
from reprofleet.inventory import load_inventory
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_log_lines, read_records
from reprofleet.sim import dockerd
from reprofleet.sim.procs import run
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import settings_for, write_playbook

pytestmark = pytest.mark.fleet

TAG = "vllm/vllm-openai:v0.25.1"
VENV_CELL = ("  - name: venv\n    runtime: {kind: venv, vllm: '0.26.0', find_links: /etc/reprofleet-sim/wheelhouse, "
             "no_index: true}\n")
OOM_CELL = "  - name: oom\n    runtime: {docker_args: [--memory, 6m, --memory-swap, 6m]}\n"  # docker's least
UNPULLED_CELL = "  - name: unpulled\n    vars: {vllm: '0.99.0'}\n"  # an image no host has; no registry answers
CELLS = "  - name: docker\n  - name: python\n    runtime: {kind: python}\n" + VENV_CELL + OOM_CELL


@pytest.fixture(scope="module")
def fleet(sim_ready: None) -> Iterator[Any]:
    from reprofleet.sim import Fleet

    up = Fleet.up((SimHostSpec("rt-a", script=("clean",) * 40, time_scale=0.02),  # records, not
                   SimHostSpec("rt-b", script=("clean",) * 40, time_scale=0.02)))  # timing, are checked
    try:
        yield up
    finally:
        up.down()


def host(fleet: Any, name: str) -> Any:
    return next(h for h in fleet.hosts if h.name == name)


def run_book(fleet: Any, book: Path, reports: Path, progress: Any = None) -> dict[str, Any]:
    plan = make_plan(load_playbook(book), load_inventory(fleet.inventory_path).hosts)
    result = run_campaign(plan, settings_for(fleet), reports, **({"progress": progress} if progress else {}))
    return {"records": list(read_records(result.directory.attempts)),
            "events": read_log_lines(result.directory.events), "directory": result.directory}


@pytest.fixture(scope="module")
def campaigns(fleet: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("runtime")
    book = write_playbook(tmp / "book", attempts=2, attempt_timeout=30, cells=CELLS, extra="order: interleaved\n")
    last_cell: dict[str, str] = {}
    moved: dict[str, Any] = {}

    def move_tag_after_first_docker_record(name: str, **fields: Any) -> None:
        """Runs in rt-a's runner thread, between its first docker record and its next slot."""
        if "cell" in fields:
            last_cell[name] = str(fields["cell"])
        if name == "rt-a" and "outcome" in fields and last_cell.get(name) == "docker" and not moved:
            moved["image"] = rebuild_under_tag(host(fleet, "rt-a"))

    first = run_book(fleet, book, tmp / "reports", move_tag_after_first_docker_record)
    venvs = {h.name: sorted((h.paths.fs("root") / ".cache" / "reprofleet" / "venvs").glob("vllm-0.26.0*/"))
             for h in fleet.hosts}
    (venvs["rt-b"][0] / ".reprofleet-complete").unlink()  # rt-b's venv is now half-built
    second = run_book(fleet, book, tmp / "reports")
    # a runtime the host cannot resolve stops the host's preparation: a campaign of its own
    unpulled = write_playbook(tmp / "unpulled", attempts=1, attempt_timeout=30, cells=UNPULLED_CELL)
    third = run_book(fleet, unpulled, tmp / "reports")
    return {"first": first, "second": second, "third": third, "moved": moved["image"], "venvs": venvs}


def image_id(sim_host: Any, tag: str = TAG) -> str:
    return run([*dockerd.client_argv(sim_host.record.netns), "image", "inspect", "--format", "{{.Id}}", tag]).strip()


def rebuild_under_tag(sim_host: Any) -> str:
    """A rebuilt image pushed under the same tag and pulled by this host: the tag now names
    another image id (docker build on the host's own daemon, no network)."""
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as archive:
        dockerfile = f"FROM {TAG}\nLABEL org.reprofleet.test.rebuilt=2\n".encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        archive.addfile(info, io.BytesIO(dockerfile))
    subprocess.run([*dockerd.client_argv(sim_host.record.netns), "build", "-q", "-t", TAG, "-"],
                   input=context.getvalue(), capture_output=True, check=True, timeout=60,
                   env={**os.environ, "DOCKER_BUILDKIT": "0"})
    return image_id(sim_host)


def resolved(events: list[dict[str, Any]], host_name: str, runtime: str) -> dict[str, Any]:
    return next(e for e in events if e["event"] == "runtime_resolved" and e["host"] == host_name
                and e["runtime"] == runtime)


def test_a_docker_record_of_an_imported_image_is_identified_by_its_image_id(
        fleet: Any, campaigns: dict[str, Any]) -> None:
    first = campaigns["first"]
    loaded = {name: image_id(host(fleet, name)) for name in ("rt-b",)}  # rt-a's tag was moved since
    docker = [r for r in first["records"] if r["cell"] == "docker"]
    assert docker and all(r["outcome"] == "clean" for r in docker)
    for record in docker:
        assert record["runtime"]["image_digest"] is None  # docker import/load: no repo digest
        assert record["runtime"]["image_id"].startswith("sha256:")
    assert {r["runtime"]["image_id"] for r in docker if r["host"] == "rt-b"} == {loaded["rt-b"]}
    first_on_a = next(r for r in docker if r["host"] == "rt-a")
    assert first_on_a["runtime"]["image_id"] == loaded["rt-b"]  # one image id on every host (docker load)
    for name in ("rt-a", "rt-b"):
        assert resolved(first["events"], name, TAG)["pulled"] is False  # the fleet loaded it before


def test_two_hosts_that_ran_different_images_under_one_tag_are_not_one_cell(fleet: Any, campaigns: dict[str, Any]) -> None:
    second = campaigns["second"]
    ids = {r["host"]: record_cell_id(r) for r in second["records"] if r["cell"] == "docker"}
    images = {r["host"]: r["runtime"]["image_id"] for r in second["records"] if r["cell"] == "docker"}
    assert images == {"rt-a": campaigns["moved"], "rt-b": image_id(host(fleet, "rt-b"))}
    assert ids["rt-a"] != ids["rt-b"]
    python_ids = {record_cell_id(r) for r in second["records"] if r["cell"] == "python"}
    assert len(python_ids) == 1  # same interpreter and packages on both hosts: one cell


def test_a_container_killed_for_memory_is_an_error_never_a_wedge(campaigns: dict[str, Any]) -> None:
    oom = [r for r in campaigns["first"]["records"] + campaigns["second"]["records"] if r["cell"] == "oom"]
    assert oom and {r["outcome"] for r in oom} == {"error"}, [(r["outcome"], r.get("reason")) for r in oom]


def test_an_image_no_host_has_and_no_registry_serves_is_infra_with_the_pull_named(campaigns: dict[str, Any]) -> None:
    unpulled = campaigns["third"]["records"]
    assert {(r["host"], r["cell"], r["outcome"]) for r in unpulled} == {("rt-a", "unpulled", "infra"),
                                                                         ("rt-b", "unpulled", "infra")}
    for record in unpulled:  # the daemon's own words: which pull, and that no registry could be reached
        assert "docker pull vllm/vllm-openai:v0.99.0 failed" in record["reason"], record["reason"]
        assert "registry-1.docker.io" in record["reason"], record["reason"]


def test_a_python_record_carries_the_interpreter_and_the_package_versions(campaigns: dict[str, Any]) -> None:
    version = subprocess.run(["/usr/bin/python3", "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    for record in (r for r in campaigns["first"]["records"] if r["cell"] == "python"):
        runtime = record["runtime"]
        assert runtime["interpreter"] == {"path": "/usr/bin/python3", "version": version}
        assert runtime["versions"] == {"python": version, "vllm": "0.25.1", "torch": "2.9.0",
                                       "flashinfer": "0.5.2", "triton": "3.5.0"}


def test_a_venv_is_built_once_per_host_reused_by_the_next_campaign_and_rebuilt_when_half_built(
        campaigns: dict[str, Any]) -> None:
    first, second = campaigns["first"], campaigns["second"]
    label = "venv-vllm-0.26.0"
    assert resolved(first["events"], "rt-a", label)["created"] is True
    assert resolved(first["events"], "rt-b", label)["created"] is True
    assert resolved(second["events"], "rt-a", label)["created"] is False  # reused
    assert resolved(second["events"], "rt-b", label)["created"] is True  # half-built: rebuilt, not used
    for folder in campaigns["venvs"].values():
        assert len(campaigns["venvs"]["rt-a"]) == 1 and (folder[0] / ".reprofleet-complete").exists()
    for record in (r for r in first["records"] + second["records"] if r["cell"] == "venv"):
        assert record["outcome"] == "clean"
        runtime = record["runtime"]
        assert runtime["versions"] == {"python": runtime["interpreter"]["version"], "vllm": "0.26.0",
                                       "torch": "2.9.1", "flashinfer": "0.5.3", "triton": "3.5.1"}
        assert "/.cache/reprofleet/venvs/vllm-0.26.0" in runtime["interpreter"]["path"]


def test_the_engine_that_ran_in_the_venv_is_the_venvs_own_version(campaigns: dict[str, Any]) -> None:
    """The hosts' own vLLM is 0.25.1; the venv's 0.26.0 is what the PoC imported."""
    directory = campaigns["first"]["directory"]
    for record in (r for r in campaigns["first"]["records"] if r["cell"] in ("venv", "python")):
        lines = [json.loads(line) for line in (directory.root / record["stream"]).read_text().splitlines()]
        text = "\n".join(str(line.get("line", "")) for line in lines if line.get("k") == "log")
        expected = "0.26.0" if record["cell"] == "venv" else "0.25.1"
        assert f"REPROFLEET_POC vllm {expected} " in text
