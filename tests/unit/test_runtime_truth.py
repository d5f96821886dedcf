"""Runtime truth without a fleet: the venv playbook runtime, identities, the digest check, the dry run."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reprofleet.runner import poc, runtimes as runtime_truth
from reprofleet.playbook.venv import poc_requirement
from reprofleet.campaign.run import describe_plan, make_plan
from reprofleet.errors import PlaybookError
from reprofleet.records.identity import cell_id
from reprofleet.model import Host, PipOptions, Runtime, RuntimeKind
from reprofleet.playbook import load_playbook
from reprofleet.runner.host_log import HostLog
from tests.support.seam_host import FakeAgent

QUIET = HostLog("h", lambda *args, **fields: None)


def write(tmp_path: Path, runtime: str) -> Path:
    """A playbook whose only cell has ``runtime`` (line 4 of the file)."""
    (tmp_path / "poc.py").write_text("")
    path = tmp_path / "campaign.yml"
    path.write_text(textwrap.dedent(f"""\
        name: t
        poc: {{script: poc.py}}
        attempts: 1
        runtime: {runtime}
        defaults: {{vars: {{vllm: "0.26.0"}}}}
        matrix: [{{name: a}}]
    """))
    return path


def error(path: Path) -> str:
    with pytest.raises(PlaybookError) as caught:
        load_playbook(path)
    return f"{caught.value.location}: {caught.value}"


# --- the venv runtime in a playbook ----------------------------------------------------


def test_a_venv_runtime_names_a_vllm_version_and_where_pip_finds_it(tmp_path: Path) -> None:
    book = load_playbook(write(tmp_path, '{kind: venv, vllm: "{vllm}", find_links: /srv/wheels, no_index: true, '
                                         'pins: ["torch==2.9.1"]}'))
    cell = book.cells[0]
    assert cell.runtime == Runtime(RuntimeKind.VENV, vllm="0.26.0", pip=PipOptions(
        find_links=("/srv/wheels",), no_index=True, pins=("torch==2.9.1",)))
    assert cell.runtime.label == "venv-vllm-0.26.0"
    assert dict(cell.factors)["runtime"]["vllm"] == "0.26.0"  # the version asked is a factor of the cell


def test_a_venv_runtime_without_a_version_is_refused_at_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "{kind: venv}")
    assert error(path).startswith(f"{path}:4:runtime.kind")
    assert "needs 'vllm'" in error(path)


def test_a_version_outside_the_poc_extras_pin_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '{kind: venv, vllm: "0.24.0"}')
    text = error(path)
    assert text.startswith(f"{path}:4:runtime.vllm") and poc_requirement() in text
    assert poc_requirement().startswith("vllm>=")  # read from pyproject's poc extra


@pytest.mark.parametrize("runtime, field, words", [
    ("{kind: venv, vllm: 0.26}", "runtime.vllm", "quote it"),
    ('{kind: venv, vllm: "0.26.0", no_index: "yes"}', "runtime.no_index", "true or false"),
    ('{kind: venv, vllm: "0.26.0", pins: "torch"}', "runtime.pins", "list of non-empty strings"),
    ('{kind: venv, vllm: "new"}', "runtime.vllm", "not a version"),
    ('{kind: venv, vlm: "0.26.0"}', "runtime.vlm", "did you mean"),
])
def test_a_bad_venv_setting_names_its_file_line_and_field(tmp_path: Path, runtime: str, field: str,
                                                          words: str) -> None:
    path = write(tmp_path, runtime)
    text = error(path)
    assert text.startswith(f"{path}:4:{field}") and words in text.lower()


def test_a_venv_per_version_and_another_folder_for_other_pip_options() -> None:
    plain = Runtime(RuntimeKind.VENV, vllm="0.25.1")
    mirrored = Runtime(RuntimeKind.VENV, vllm="0.25.1", pip=PipOptions(index_url="https://mirror/simple"))
    assert runtime_truth.venv_name(plain) == "vllm-0.25.1"
    assert runtime_truth.venv_name(mirrored).startswith("vllm-0.25.1-")
    assert runtime_truth.venv_name(mirrored) == runtime_truth.venv_name(
        Runtime(RuntimeKind.VENV, vllm="0.25.1", pip=PipOptions(index_url="https://mirror/simple")))


def test_a_venv_cell_runs_the_poc_with_the_venvs_interpreter(tmp_path: Path) -> None:
    cell = load_playbook(write(tmp_path, '{kind: venv, vllm: "0.26.0"}')).cells[0]
    command = poc.build(cell, poc_path="/h/poc.py", state_root="/h/.cache/reprofleet", attempt_id="x",
                        persistent=True, gpu=0)
    assert command.argv[:2] == ("/h/.cache/reprofleet/venvs/vllm-0.26.0/bin/python", "/h/poc.py")


def test_the_dry_run_says_how_each_runtime_is_resolved(tmp_path: Path) -> None:
    book = load_playbook(write(tmp_path, '{kind: venv, vllm: "0.26.0", find_links: /srv/wheels, no_index: true}'))
    text = describe_plan(make_plan(book, [Host("h1", "10.0.0.1")]))
    assert "venv vllm==0.26.0" in text and "--no-index --find-links /srv/wheels" in text


# --- identity: what ran, not what it was called ----------------------------------------------


def test_two_images_under_one_tag_are_two_cells_and_one_image_on_two_hosts_is_one() -> None:
    base = {"kind": "docker", "label": "vllm/vllm-openai:v0.25.1", "cache_key": "k"}
    old = {**base, "image_digest": "vllm/vllm-openai@sha256:aaa", "image_id": "sha256:111"}
    new = {**base, "image_digest": "vllm/vllm-openai@sha256:bbb", "image_id": "sha256:222"}
    assert cell_id("a", {}, old, "poc") != cell_id("a", {}, new, "poc")
    assert cell_id("a", {}, old, "poc") == cell_id("a", {}, dict(old), "poc")


def test_package_versions_define_a_python_cell_but_the_interpreters_path_does_not() -> None:
    base = {"kind": "python", "label": "python3", "versions": {"python": "3.11.2", "vllm": "0.25.1"}}
    here = {**base, "interpreter": {"path": "/usr/bin/python3", "version": "3.11.2"}}
    there = {**base, "interpreter": {"path": "/opt/py/bin/python3", "version": "3.11.2"}}
    upgraded = {**here, "versions": {"python": "3.11.2", "vllm": "0.26.0"}}
    assert cell_id("p", {}, here, None) == cell_id("p", {}, there, None)
    assert cell_id("p", {}, here, None) != cell_id("p", {}, upgraded, None)


def test_the_recorded_digest_is_the_tags_own_repository() -> None:
    facts = runtime_truth.image_facts("ghcr.io/lab/vllm:1", {
        "image": "ghcr.io/lab/vllm:1", "id": "sha256:1",
        "repo_digests": ["mirror.local/vllm@sha256:mmm", "ghcr.io/lab/vllm@sha256:ggg"]})
    assert facts.image_digest == "ghcr.io/lab/vllm@sha256:ggg"
    assert facts.record_fields() == {"image_digest": "ghcr.io/lab/vllm@sha256:ggg", "image_id": "sha256:1"}


# --- the check before each docker attempt -----------------------------------------------------


@dataclass
class Result:
    stdout: str
    ok: bool = True


class FakeSession:
    """A host whose ``docker image inspect`` answers from a dict (tag -> (id, digests json))."""

    def __init__(self, images: dict[str, tuple[str, str]]) -> None:
        self.images = images
        self.commands: list[str] = []

    def run(self, command: str, timeout: float) -> Result:
        self.commands.append(command)
        tag = command.rsplit(" ", 1)[-1].strip("'")
        if tag not in self.images:
            return Result("", ok=False)
        ident, digests = self.images[tag]
        return Result(digests if "RepoDigests" in command else ident)


def docker_cell(tmp_path: Path) -> Any:
    return load_playbook(write(tmp_path, '{image: "vllm/vllm-openai:v{vllm}"}')).cells[0]


def test_a_tag_that_still_names_the_cells_image_passes_with_one_cheap_command(tmp_path: Path) -> None:
    cell = docker_cell(tmp_path)
    runtimes = runtime_truth.HostRuntimes(QUIET)
    runtimes.facts[cell.runtime.label] = runtime_truth.RuntimeFacts(cell.runtime.label, image_id="sha256:1",
                                                                    image_digest="vllm/vllm-openai@sha256:a")
    session = FakeSession({"vllm/vllm-openai:v0.26.0": ("sha256:1", '["vllm/vllm-openai@sha256:a"]')})
    assert runtimes.check(FakeAgent(session=session, host="h1"), cell) is None  # type: ignore[arg-type]
    assert len(session.commands) == 1 and "--format '{{.Id}}'" in session.commands[0]


def test_a_moved_tag_is_reported_with_the_old_and_the_new_digest(tmp_path: Path) -> None:
    cell = docker_cell(tmp_path)
    runtimes = runtime_truth.HostRuntimes(QUIET)
    runtimes.facts[cell.runtime.label] = runtime_truth.RuntimeFacts(cell.runtime.label, image_id="sha256:1",
                                                                    image_digest="vllm/vllm-openai@sha256:a")
    session = FakeSession({"vllm/vllm-openai:v0.26.0": ("sha256:2", '["vllm/vllm-openai@sha256:b"]')})
    moved = runtimes.check(FakeAgent(session=session, host="h1"), cell)  # type: ignore[arg-type]
    assert moved is not None
    assert (moved.old_digest, moved.new_digest, moved.old_id, moved.new_id) == (
        "vllm/vllm-openai@sha256:a", "vllm/vllm-openai@sha256:b", "sha256:1", "sha256:2")
    assert "vllm/vllm-openai:v0.26.0 moved" in moved.why


def test_a_resumed_campaign_holds_a_cell_to_the_image_its_earlier_records_ran(tmp_path: Path) -> None:
    """The tag moved while the controller was down: the host now has the new image, and the
    cell's earlier records say the old one, so the resumed run must not mix them."""
    cell = docker_cell(tmp_path)
    earlier = [{"cell": "a", "runtime": {"image_id": "sha256:1", "image_digest": "vllm/vllm-openai@sha256:a"}}]
    runtimes = runtime_truth.HostRuntimes(QUIET, earlier)
    runtimes.facts[cell.runtime.label] = runtime_truth.RuntimeFacts(cell.runtime.label, image_id="sha256:2",
                                                                    image_digest="vllm/vllm-openai@sha256:b")
    session = FakeSession({"vllm/vllm-openai:v0.26.0": ("sha256:2", '["vllm/vllm-openai@sha256:b"]')})
    moved = runtimes.check(FakeAgent(session=session, host="h1"), cell)  # type: ignore[arg-type]
    assert moved is not None and moved.old_id == "sha256:1" and moved.new_id == "sha256:2"
