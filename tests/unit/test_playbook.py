"""playbook.py turns campaign YAML into validated cells, and plans the order of attempts."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from reprofleet.errors import PlaybookError
from reprofleet.model import GpuPolicy, Host, Outcome, Phase, Runtime, RuntimeKind, StopKind, StopRule, Timeouts
from reprofleet.playbook import load_playbook, plan_order
from tests.support import paths

FIXTURES = paths.FIXTURES / "playbooks"
EXAMPLE = paths.REPO / "playbooks" / "sm120-hostwedge.yml"
DEMO = EXAMPLE.parent / "demo.yml"


def write(tmp_path: Path, text: str) -> Path:
    """A playbook beside an (empty) PoC script ``poc.py``; line 1 is the text's first line."""
    (tmp_path / "poc.py").write_text("")
    path = tmp_path / "campaign.yml"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


@pytest.fixture(scope="module")
def full() -> dict[str, object]:
    book = load_playbook(FIXTURES / "full.yml")
    return {"book": book, **{cell.name: cell for cell in book.cells}}


# --- matrix expansion and merging ----------------------------------------------------


def test_cells_keep_their_matrix_position(full: dict) -> None:
    book = full["book"]
    assert [(c.index, c.name) for c in book.cells] == [
        (0, "default"), (1, "lgc-2800"), (2, "pl-350"), (3, "merged"), (4, "python-host"), (5, "other-image")]


def test_env_args_and_vars_merge_key_by_key_and_null_removes_a_default(full: dict) -> None:
    default, merged = full["default"], full["merged"]
    assert default.env == (("CUTE_DSL_ARCH", "sm_120a"), ("HF_HUB_OFFLINE", "1"), ("RETRIES", "3"))
    assert merged.env == (("CUDA_LAUNCH_BLOCKING", "1"), ("CUTE_DSL_ARCH", "sm_120a"), ("HF_HUB_OFFLINE", "1"))
    assert merged.args == (("enforce_eager", True), ("gpu_memory_utilization", 0.87), ("spec_tokens", 1))
    assert merged.runtime.image == "vllm/vllm-openai:v0.26.0"  # the cell's var in the default image


def test_gpu_factors_become_the_cells_policy(full: dict) -> None:
    assert full["default"].gpu == GpuPolicy(persistence=True)
    assert full["lgc-2800"].gpu == GpuPolicy(graphics_clocks=(180, 2800), memory_clocks=(405, 14001),
                                             persistence=True)
    # null: leave the card at its default, even where defaults set a value
    assert full["pl-350"].gpu == GpuPolicy(power_limit_w=350.0, application_clocks=(14001, 2400))


def test_runtime_merges_top_level_then_defaults_then_the_cell(full: dict) -> None:
    assert full["default"].runtime == Runtime(RuntimeKind.DOCKER, image="vllm/vllm-openai:v0.25.1",
                                              docker_args=("--ipc", "host", "--shm-size", "8g"))
    assert full["python-host"].runtime == Runtime(RuntimeKind.PYTHON, python="/opt/vllm-0.25.1/bin/python")
    assert full["other-image"].runtime == Runtime(RuntimeKind.DOCKER, image="ghcr.io/lab/vllm:0.25.1-cu130")


def test_factors_are_plain_json_data_with_every_setting(full: dict) -> None:
    for cell in full["book"].cells:
        factors = json.loads(json.dumps(dict(cell.factors)))
        assert set(factors) == {"graphics_clocks", "memory_clocks", "power_limit", "persistence",
                                "application_clocks", "env", "args", "vars", "runtime"}
    assert dict(full["lgc-2800"].factors)["graphics_clocks"] == [180, 2800]
    assert dict(full["merged"].factors)["runtime"] == {
        "kind": "docker", "image": "vllm/vllm-openai:v0.26.0", "python": None,
        "docker_args": ["--ipc", "host", "--shm-size", "8g"]}
    assert dict(full["merged"].factors)["env"]["CUDA_LAUNCH_BLOCKING"] == "1"


def test_top_level_settings_are_resolved(full: dict) -> None:
    book = full["book"]
    assert book.poc.script == str(FIXTURES.resolve() / "poc" / "placeholder.py")
    assert (book.poc.cache, book.poc.cache_source) == ("fresh", str(FIXTURES.resolve() / "cache_seed"))
    assert book.timeouts == Timeouts(attempt=120.0, boot=300.5, connect=5.0)
    assert (book.attempts, book.order, book.seed) == (3, "shuffled", 7)
    assert book.reproductions == (Outcome.WEDGE, Outcome.REBOOT)  # listed twice, counted once
    assert book.description == "Every factor, merged over defaults"
    assert (book.reference, book.at_risk_phase, book.max_excluded_share) == (
        "lgc-2800", Phase.CUDA_GRAPH_CAPTURE, 0.25)
    assert book.stop == StopRule(StopKind.FIRST_REPRODUCTION, confidence=0.9)


def test_each_cell_runs_under_its_own_stop_rule_the_campaigns_or_none_for_the_reference(full: dict) -> None:
    book = full["book"]
    sprt = StopRule(StopKind.SPRT, p0=0.3, p1=0.03, alpha=0.1, beta=0.1)
    assert (full["pl-350"].stop, full["default"].stop) == (sprt, None)
    assert book.stop_rule(full["pl-350"]) == sprt
    assert book.stop_rule(full["default"]) == StopRule(StopKind.FIRST_REPRODUCTION, confidence=0.9)
    assert book.stop_rule(full["lgc-2800"]) == StopRule()  # the reference never stops early


def test_a_minimal_playbook_gets_the_documented_defaults(tmp_path: Path) -> None:
    book = load_playbook(write(tmp_path, """
        name: minimal
        poc: {script: poc.py}
        attempts: 1
        matrix: [{name: only}]
    """))
    assert (book.order, book.reproductions, book.timeouts, book.poc.cache) == (
        "blocks", (Outcome.WEDGE, Outcome.REBOOT), Timeouts(), "persistent")
    assert (book.reference, book.at_risk_phase, book.max_excluded_share, book.stop) == (
        "only", None, 0.2, StopRule())
    cell = book.cells[0]
    assert (cell.gpu, cell.env, cell.args, cell.runtime) == (GpuPolicy(), (), (), Runtime(RuntimeKind.PYTHON))


def test_an_image_alone_means_a_docker_runtime(tmp_path: Path) -> None:
    book = load_playbook(write(tmp_path, """
        name: t
        poc: {script: poc.py}
        attempts: 1
        runtime: {image: "img:{tag}"}
        defaults: {vars: {tag: 7}}
        matrix: [{name: a}]
    """))
    assert book.cells[0].runtime == Runtime(RuntimeKind.DOCKER, image="img:7")


# --- attempts override ---------------------------------------------------------------


def test_attempts_override_replaces_the_playbooks_count(full: dict) -> None:
    assert load_playbook(FIXTURES / "full.yml", attempts_override=11).attempts == 11


def test_attempts_may_be_left_out_when_overridden(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\npoc: {script: poc.py}\nmatrix: [{name: a}]\n")
    assert load_playbook(path, attempts_override=2).attempts == 2
    with pytest.raises(PlaybookError) as caught:
        load_playbook(path)
    assert str(caught.value.location) == f"{path}:1:attempts"


def test_an_attempts_override_below_one_is_refused() -> None:
    with pytest.raises(PlaybookError) as caught:
        load_playbook(FIXTURES / "full.yml", attempts_override=0)
    assert caught.value.location.field == "attempts"


# --- order of attempts on one host ---------------------------------------------------


def _book(tmp_path: Path, order: str, seed: int | None = None) -> object:
    seed_line = f"seed: {seed}\n" if seed is not None else ""
    return load_playbook(write(tmp_path, f"""
name: t
poc: {{script: poc.py}}
attempts: 3
order: {order}
{seed_line}matrix: [{{name: a}}, {{name: b}}, {{name: c}}]
"""))


def test_interleaved_runs_round_robin_over_cells(tmp_path: Path) -> None:
    assert plan_order(_book(tmp_path, "interleaved"), "ws01") == [
        (0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1), (0, 2), (1, 2), (2, 2)]


def test_sequential_runs_every_attempt_of_a_cell_before_the_next(tmp_path: Path) -> None:
    assert plan_order(_book(tmp_path, "sequential"), "ws01") == [
        (0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]


def test_shuffled_is_a_stable_per_host_permutation_with_attempts_counting_up(tmp_path: Path) -> None:
    book = _book(tmp_path, "shuffled", seed=1)
    plans = {name: plan_order(book, name) for name in ("ws01", "ws02", "ws03", "ws04")}
    for plan in plans.values():
        assert sorted(plan) == [(c, a) for c in range(3) for a in range(3)]
        for cell in range(3):
            assert [a for c, a in plan if c == cell] == [0, 1, 2]
    assert plan_order(book, Host("ws01", "10.0.0.1")) == plans["ws01"]  # same on every run
    assert len({tuple(p) for p in plans.values()}) > 1  # hosts do not share one order
    # pinned: the order must not change between releases, or a resumed campaign disagrees
    assert plans["ws01"] == [(2, 0), (2, 1), (1, 0), (1, 1), (0, 0), (1, 2), (0, 1), (0, 2), (2, 2)]
    other_seed = _book(tmp_path, "shuffled", seed=2)
    assert [plan_order(other_seed, n) for n in plans] != list(plans.values())


# --- every validation error at its file:line:field -----------------------------------

HEAD = "name: t\npoc: {script: poc.py}\nattempts: 2\n"  # lines 1-3


@pytest.mark.parametrize(
    ("body", "where", "words"),
    [
        ("atempts: 3\nmatrix: [{name: a}]\n", "4:atempts", "did you mean 'attempts'?"),
        ("matrix: [{name: a}]\ntimeouts: {atempt: 5}\n", "5:timeouts.atempt", "did you mean 'attempt'?"),
        ("matrix: [{name: a}]\ntimeouts: {boot: -1}\n", "5:timeouts.boot", "> 0"),
        ("matrix: [{name: a}]\ntimeouts:\n  boot: 60\n  slurm_jobs: 0\n", "7:timeouts.slurm_jobs", "> 0"),
        ("matrix: [{name: a}]\ntimeouts: {slurm_job: 600}\n", "5:timeouts.slurm_job", "did you mean 'slurm_jobs'?"),
        ("matrix: [{name: a}]\norder: interleave\n", "5:order", "did you mean 'interleaved'?"),
        ("matrix: [{name: a}]\nseed: lucky\n", "5:seed", "integer"),
        ("matrix: [{name: a}]\nreproductions:\n  - wedge\n  - wegde\n", "7:reproductions[1]",
         "did you mean 'wedge'?"),
        ("matrix: []\n", "4:matrix", "non-empty"),
        ("matrix:\n  - just-a-name\n", "5:matrix[0]", "mapping"),
        ("matrix:\n  - name: a\n  - name: a\n", "6:matrix[1].name", "already used by matrix[0]"),
        ("matrix:\n  - name: a\n  - graphics_clocks: [1, 2]\n", "6:matrix[1].name", "needs a 'name'"),
        ("matrix:\n  - name: 'a b'\n", "5:matrix[0].name", "letters, digits"),
        ("matrix:\n  - name: a\n    graphics_clock: [180, 2800]\n", "6:matrix[0].graphics_clock",
         "did you mean 'graphics_clocks'?"),
        ("matrix:\n  - name: a\n    graphics_clocks: [2800, 180]\n", "6:matrix[0].graphics_clocks",
         "above maximum"),
        ("matrix:\n  - name: a\n    memory_clocks: \"405\"\n", "6:matrix[0].memory_clocks", "two whole MHz"),
        ("matrix:\n  - name: a\n    power_limit: 0\n", "6:matrix[0].power_limit", "> 0"),
        ("matrix:\n  - name: a\n    persistence: 1\n", "6:matrix[0].persistence", "true or false"),
        ("matrix:\n  - name: a\n    env:\n      FLAG: true\n", "7:matrix[0].env.FLAG", "quote it"),
        ("matrix:\n  - name: a\n    env:\n      2BAD: '1'\n", "7:matrix[0].env.2BAD", "not a name"),
        ("matrix:\n  - name: a\n    args: {spec_tokens: [1, 2]}\n", "6:matrix[0].args.spec_tokens",
         "single value"),
        ("matrix:\n  - name: a\n    vars: {vllm: 0.10}\n", "6:matrix[0].vars.vllm", "quote it"),
        ("defaults:\n  name: x\nmatrix: [{name: a}]\n", "5:defaults.name", "unknown key"),
        ("defaults:\n  power_limt: 3\nmatrix: [{name: a}]\n", "5:defaults.power_limt",
         "did you mean 'power_limit'?"),
        ("runtime:\n  kind: dokcer\n  image: x\nmatrix: [{name: a}]\n", "5:runtime.kind",
         "did you mean 'docker'?"),
        ("runtime:\n  imgae: x\nmatrix: [{name: a}]\n", "5:runtime.imgae", "did you mean 'image'?"),
        ("runtime:\n  kind: docker\nmatrix: [{name: a}]\n", "5:runtime.kind", "needs 'image'"),
        ("runtime:\n  image: x\n  docker_args: --ipc host\nmatrix: [{name: a}]\n", "6:runtime.docker_args",
         "must be a list"),
        ("matrix:\n  - name: a\n    runtime: {image: x, docker_args: [--ipc, [host]]}\n",
         "6:matrix[0].runtime.docker_args[1]", "text"),
        ("matrix:\n  - name: a\n    env: {A: '1'}\n    env: {B: '2'}\n", "7:env", "written twice"),
        ("matrix:\n  - name: a\n    args: {x: [1\n", "7", "YAML syntax"),
    ],
)
def test_a_bad_playbook_is_refused_at_its_file_line_and_field(
    tmp_path: Path, body: str, where: str, words: str
) -> None:
    path = write(tmp_path, HEAD + body)
    with pytest.raises(PlaybookError) as caught:
        load_playbook(path)
    assert str(caught.value.location) == f"{path}:{where}"
    assert words in caught.value.reason


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        ("nme: t\nname: t\npoc: {script: poc.py}\nattempts: 1\nmatrix: [{name: a}]\n", "1:nme",
         "did you mean 'name'?"),
        ("poc: {script: poc.py}\nattempts: 1\nmatrix: [{name: a}]\n", "1:name", "required"),
        ("name: t\npoc: {script: missing.py}\nattempts: 1\nmatrix: [{name: a}]\n", "2:poc.script", "no such file"),
        ("name: t\npoc: {scirpt: poc.py}\nattempts: 1\nmatrix: [{name: a}]\n", "2:poc.scirpt",
         "did you mean 'script'?"),
        ("name: t\npoc: {script: poc.py, cache: warm}\nattempts: 1\nmatrix: [{name: a}]\n", "2:poc.cache",
         "persistent, fresh"),
        ("name: t\npoc: {script: poc.py, cache_source: nowhere}\nattempts: 1\nmatrix: [{name: a}]\n",
         "2:poc.cache_source", "no such folder"),
        ("name: t\npoc:\n  script: poc.py\nattempts: 0\nmatrix: [{name: a}]\n", "4:attempts", ">= 1"),
        ("name: t\npoc: {script: poc.py}\nattempts: true\nmatrix: [{name: a}]\n", "3:attempts", ">= 1"),
        ("name: t/x\npoc: {script: poc.py}\nattempts: 1\nmatrix: [{name: a}]\n", "1:name", "letters, digits"),
    ],
)
def test_top_level_mistakes_are_refused_at_their_line(tmp_path: Path, text: str, where: str, words: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(PlaybookError) as caught:
        load_playbook(path)
    assert str(caught.value.location) == f"{path}:{where}"
    assert words in caught.value.reason


# --- placeholders --------------------------------------------------------------------


def test_a_placeholder_without_a_var_names_the_cell_and_where_the_text_is(tmp_path: Path) -> None:
    path = write(tmp_path, """
        name: t
        poc: {script: poc.py}
        attempts: 1
        runtime:
          image: "vllm/vllm-openai:v{vllm}"
        defaults:
          vars: {vllm: "0.25.1"}
        matrix:
          - name: ok
          - name: forgot
            vars: {vllm: null}
    """)
    with pytest.raises(PlaybookError) as caught:
        load_playbook(path)
    assert str(caught.value.location) == f"{path}:5:runtime.image"
    assert "cell 'forgot' (matrix[1]) has no var 'vllm'" in caught.value.reason


@pytest.mark.parametrize(
    ("image", "words"),
    [("img:{vllm!r}", "plain {name}"), ("img:{0}", "plain {name}"), ("img:{vllm", "unbalanced"),
     ("img:{vlm}", "did you mean 'vllm'?")],
)
def test_placeholders_are_plain_names(tmp_path: Path, image: str, words: str) -> None:
    path = write(tmp_path, f"""
name: t
poc: {{script: poc.py}}
attempts: 1
defaults: {{vars: {{vllm: '1'}}}}
matrix:
  - name: a
    runtime: {{image: "{image}"}}
""")
    with pytest.raises(PlaybookError) as caught:
        load_playbook(path)
    assert str(caught.value.location) == f"{path}:7:matrix[0].runtime.image"
    assert words in caught.value.reason


def test_doubled_braces_are_literal_braces(tmp_path: Path) -> None:
    path = write(tmp_path, """
        name: t
        poc: {script: poc.py}
        attempts: 1
        runtime: {kind: python, python: "/opt/{{x}}/{v}/python"}
        defaults: {vars: {v: 3}}
        matrix: [{name: a}]
    """)
    assert load_playbook(path).cells[0].runtime.python == "/opt/{x}/3/python"


# --- the shipped example -------------------------------------------------------------


@pytest.mark.skipif(not (EXAMPLE.parent / "poc" / "sm120_hostwedge.py").exists(),
                    reason="playbooks/poc/sm120_hostwedge.py is not written yet")
def test_the_seed_playbook_loads_with_one_cell_per_seed_variation() -> None:
    book = load_playbook(EXAMPLE)
    cells = {cell.name: cell for cell in book.cells}
    assert list(cells) == ["default", "lgc-2800", "pl-350", "pl-600-lgc-2800", "spec-1", "spec-2", "spec-8",
                           "cuda-launch-blocking", "eager", "vllm-0.26.0"]
    assert (book.attempts, book.reproductions, book.poc.cache) == (6, (Outcome.WEDGE, Outcome.REBOOT), "persistent")
    assert (book.order, book.reference, book.at_risk_phase, book.stop) == (
        "blocks", "default", Phase.CUDA_GRAPH_CAPTURE, StopRule())  # stopping early is opt-in
    assert (book.timeouts.attempt, book.timeouts.boot) == (900.0, 600.0)
    default = cells["default"]
    assert default.runtime == Runtime(RuntimeKind.DOCKER, image="vllm/vllm-openai:v0.25.1",
                                      docker_args=("--ipc", "host"))
    assert dict(default.args) == {"spec_tokens": 9, "gpu_memory_utilization": 0.87}
    assert dict(default.env) == {
        "HF_HUB_OFFLINE": "1", "CUTE_DSL_ARCH": "sm_120a", "VLLM_USE_FLASHINFER_SAMPLER": "0",
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert default.gpu.is_default
    assert cells["lgc-2800"].gpu == GpuPolicy(graphics_clocks=(180, 2800))
    assert cells["pl-350"].gpu == GpuPolicy(power_limit_w=350.0)
    assert cells["pl-600-lgc-2800"].gpu == GpuPolicy(graphics_clocks=(180, 2800), power_limit_w=600.0)
    assert [dict(cells[f"spec-{n}"].args)["spec_tokens"] for n in (1, 2, 8)] == [1, 2, 8]
    assert dict(cells["cuda-launch-blocking"].env)["CUDA_LAUNCH_BLOCKING"] == "1"
    assert dict(cells["eager"].args)["enforce_eager"] is True
    assert cells["vllm-0.26.0"].runtime.image == "vllm/vllm-openai:v0.26.0"


@pytest.mark.skipif(not (EXAMPLE.parent / "poc" / "sm120_hostwedge.py").exists(),
                    reason="playbooks/poc/sm120_hostwedge.py is not written yet")
def test_the_seed_playbooks_commented_sprt_example_is_a_valid_stop_rule(tmp_path: Path) -> None:
    lines = EXAMPLE.read_text().splitlines()
    start = lines.index("# stop:")
    block = [lines[start]] + [line for line in lines[start + 1:] if line.startswith("#   ")][:5]
    assert [line.split(":")[0].strip("# ") for line in block] == ["stop", "rule", "p0", "p1", "alpha", "beta"]
    enabled = lines[:start] + [line[2:] for line in block] + lines[start + len(block):]
    shutil.copytree(EXAMPLE.parent / "poc", tmp_path / "poc")  # a link out of the playbook's folder is refused
    (tmp_path / "book.yml").write_text("\n".join(enabled) + "\n")
    book = load_playbook(tmp_path / "book.yml")
    assert book.stop == StopRule(StopKind.SPRT, p0=0.3, p1=0.03, alpha=0.05, beta=0.2)


@pytest.mark.skipif(not (EXAMPLE.parent / "poc" / "sm120_hostwedge.py").exists(),
                    reason="playbooks/poc/sm120_hostwedge.py is not written yet")
def test_the_demo_stays_small_and_judges_like_the_seed() -> None:
    demo, seed = load_playbook(DEMO), load_playbook(EXAMPLE)
    assert [c.name for c in demo.cells] == ["default", "lgc-2800", "pl-350"]
    assert demo.attempts <= 4  # make demo has to finish in minutes
    assert (demo.order, demo.reference, demo.judging) == ("blocks", "default", seed.judging)


def test_the_slurm_job_wait_is_a_timeout_of_the_playbook(tmp_path: Path) -> None:
    (tmp_path / "poc.py").write_text("print('x')\n")
    path = tmp_path / "book.yml"
    path.write_text(HEAD + "timeouts: {slurm_jobs: 1800}\nmatrix: [{name: a}]\n")
    assert load_playbook(path).timeouts.slurm_jobs == 1800.0
    path.write_text(HEAD + "matrix: [{name: a}]\n")
    assert load_playbook(path).timeouts.slurm_jobs == 3600.0  # an hour unless the playbook says otherwise


def test_the_dry_run_plan_names_the_slurm_job_wait_it_leaves_out_of_its_bound(tmp_path: Path) -> None:
    from reprofleet.campaign.run import describe_plan, make_plan

    (tmp_path / "poc.py").write_text("print('x')\n")
    path = tmp_path / "book.yml"
    path.write_text(HEAD + "timeouts: {slurm_jobs: 1800}\nmatrix: [{name: a}]\n")
    book = load_playbook(path)
    on_slurm = describe_plan(make_plan(book, [Host("gpu01", "10.0.0.11", vars={"slurm_node": "gpu01"})]))
    assert ("Slurm nodes (1): each waits up to 1800 s (timeouts.slurm_jobs) for the jobs running on it before its "
            "first attempt, then is refused; not counted in the duration below") in on_slurm.splitlines()
    assert "slurm_jobs" not in describe_plan(make_plan(book, [Host("ws01", "10.0.0.1")]))
