"""``search:`` and ``bisect:`` in a playbook: one ordinary cell per level, or one line naming file, line and field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reprofleet.errors import PlaybookError
from reprofleet.model import GpuPolicy, RuntimeKind
from reprofleet.playbook import load_playbook
from reprofleet.playbook.ladder import host_groups, ladder_from_json, ladder_json, ladder_plan
from reprofleet.model import Host
from reprofleet.stats.search_contract import BisectSpec
from tests.support.search_playbooks import EXAMPLE, write


def test_a_clock_search_makes_one_cell_per_ceiling_over_the_floor_named_from_the_value(tmp_path: Path) -> None:
    book = load_playbook(write(tmp_path, "search: {factor: graphics_clocks, levels: [2600, 2800], floor: 210}\n"))
    assert [c.name for c in book.cells] == ["search-graphics_clocks-2600", "search-graphics_clocks-2800"]
    assert book.cells[1].gpu == GpuPolicy(graphics_clocks=(210, 2800))
    assert book.cells[1].factors["vars"] == {"vllm": "0.25.1"}  # the defaults merged as into any matrix cell
    assert book.reference == "search-graphics_clocks-2600" and book.attempts == 1
    assert book.search is not None and book.search.floor == 210 and book.ladder is book.search


def test_the_default_floor_is_180_mhz_and_args_env_and_power_levels_set_their_factor(tmp_path: Path) -> None:
    assert load_playbook(write(tmp_path, "search: {factor: graphics_clocks, levels: [2800]}\n")).cells[0].gpu \
        == GpuPolicy(graphics_clocks=(180, 2800))
    args = load_playbook(write(tmp_path, "search: {factor: args.spec_tokens, levels: [1, 2, 8], riskier: higher}\n"))
    assert [dict(c.args)["spec_tokens"] for c in args.cells] == [1, 2, 8] and args.cells[2].name == "search-spec_tokens-8"
    env = load_playbook(write(tmp_path, "search: {factor: env.CHUNK, levels: [64, 128]}\n"))
    assert dict(env.cells[0].env)["CHUNK"] == "64"
    power = load_playbook(write(tmp_path, "search: {factor: power_limit, levels: [350, 450, 600], riskier: higher}\n"))
    assert power.cells[0].gpu.power_limit_w == 350.0


def test_a_bisection_over_vllm_versions_fills_the_image_placeholder_oldest_first(tmp_path: Path) -> None:
    book = load_playbook(write(tmp_path, """
        bisect:
          factor: vars.vllm
          versions: ["0.24.0", "0.25.1", "0.26.0", "0.27.0"]
          known: {bad: first}
          budget: {attempts: 60}
        """))
    assert [c.name for c in book.cells][2] == "bisect-vllm-0.26.0"
    assert book.cells[2].runtime.kind is RuntimeKind.DOCKER and book.cells[2].runtime.image == "vllm/vllm-openai:v0.26.0"
    assert book.bisect is not None and book.bisect.bad_first and book.bisect.posterior == 0.95
    assert book.reference == "bisect-vllm-0.24.0"  # the known bad end
    last = load_playbook(write(tmp_path, "bisect: {factor: runtime.image, versions: [a:1, b:2], known: {bad: last}}\n"))
    assert last.reference == "bisect-image-b_2" and last.cells[0].runtime.image == "a:1"


def test_the_spec_round_trips_through_the_manifest_with_host_groups(tmp_path: Path) -> None:
    book = load_playbook(write(tmp_path, "search:\n  factor: graphics_clocks\n  levels: [2600, 2800]\n"
                                         "  groups: {rack-a: a, 'ws1*': b}\n  budget: {attempts: 9, power_cycles: 3}\n"))
    assert book.search is not None
    hosts = [Host("ws10", "x"), Host("h2", "x", groups=("rack-a",)), Host("h3", "x")]
    assert host_groups(book.search, hosts) == (("ws10", "b"), ("h2", "a"))
    plan = ladder_plan(book.search, hosts, seed=7)
    assert ladder_from_json(ladder_json(plan)) == plan
    assert plan.spec.levels == 2 and plan.spec.budget_attempts == 9 and plan.spec.seed == 7  # type: ignore[union-attr]


def test_a_bisection_takes_host_groups_like_a_search_and_keeps_them_through_the_manifest(tmp_path: Path) -> None:
    book = load_playbook(write(tmp_path, "bisect:\n  factor: vars.vllm\n  versions: ['0.24.0', '0.26.0']\n"
                                         "  groups: {rack-a: a, 'ws1*': b}\n"))
    assert book.bisect is not None and book.bisect.groups == (("rack-a", "a"), ("ws1*", "b"))
    hosts = [Host("ws10", "x"), Host("h2", "x", groups=("rack-a",)), Host("h3", "x")]
    plan = ladder_plan(book.bisect, hosts, seed=3)
    assert isinstance(plan.spec, BisectSpec) and plan.spec.groups == (("ws10", "b"), ("h2", "a"))
    assert ladder_from_json(ladder_json(plan)) == plan


@pytest.mark.parametrize(
    ("body", "where", "words"),
    [
        ("search: {factor: graphics_clocks, levels: [2800, 2600]}\n", "5:search.levels[1]", "strictly increasing"),
        ("search:\n  factor: graphics_clocks\n  levels:\n    - 2600\n    - 2600\n", "9:search.levels[1]", "repeats"),
        ("search: {factor: graphics_clocks, levels: []}\n", "5:search.levels", "non-empty list"),
        ("search: {factor: memory_clocks, levels: [1, 2]}\n", "5:search.factor", "cannot set"),
        ("search: {factor: graphic_clocks, levels: [1, 2]}\n", "5:search.factor", "did you mean 'graphics_clocks'?"),
        ("search: {factor: args.x, levels: [a, b]}\n", "5:search.levels[0]", "a level is a number"),
        ("search: {factor: graphics_clocks, levels: [150, 2800]}\n", "5:search.levels[0]", "above the floor 180"),
        ("search: {factor: args.x, levels: [1, 2], floor: 100}\n", "5:search.floor", "only to factor graphics_clocks"),
        ("search:\n  factor: args.x\n  levels: [1, 2]\n  target: {epsilon: 1}\n", "8:search.target.epsilon", "(0, 1)"),
        ("search:\n  factor: args.x\n  levels: [1, 2]\n  target: {epsilon: 0}\n", "8:search.target.epsilon", "(0, 1)"),
        ("search:\n  factor: args.x\n  levels: [1, 2]\n  target: {delta: 1.5}\n", "8:search.target.delta", "(0, 1)"),
        ("search:\n  factor: args.x\n  levels: [1, 2]\n  target: {epsilonn: 0.1}\n", "8:search.target.epsilonn",
         "did you mean 'epsilon'?"),
        ("search:\n  factor: args.x\n  levels: [1, 2]\n  riskier: up\n", "8:search.riskier", "higher or lower"),
        ("search:\n  factor: args.x\n  levels: [1, 2]\n  budgett: {}\n", "8:search.budgett", "did you mean 'budget'?"),
        ("search:\n  factor: args.x\n  levels: [1, 2]\n  budget: {attempts: 0}\n", "8:search.budget.attempts", ">= 1"),
        ("search:\n  factor: args.x\n  levels: [1, 2]\n  epsilon_high: 0.01\n", "8:search.epsilon_high", "above"),
        ("search: {factor: args.x, levels: [1]}\nbisect: {factor: vars.vllm, versions: ['1', '2']}\n", "6:bisect",
         "not both"),
        ("search: {factor: args.x, levels: [1]}\nmatrix: [{name: a}]\n", "6:matrix", "cannot sit beside"),
        ("bisect: {factor: vars.vllm, versions: ['0.25.1']}\n", "5:bisect.versions", "at least two"),
        ("stop: {rule: sprt, p0: 0.3, p1: 0.03}\nsearch: {factor: args.x, levels: [1]}\n", "5:stop", "cannot sit beside"),
        ("bisect:\n  factor: vars.vllm\n  versions:\n    - '0.25.1'\n    - 0.26\n", "9:bisect.versions[1]", "quote it"),
        ("bisect: {factor: vars.vllm, versions: ['1', '1']}\n", "5:bisect.versions[1]", "repeats"),
        ("bisect: {factor: vars.torch, versions: ['1', '2']}\n", "5:bisect.factor", "no runtime field says {torch}"),
        ("bisect: {factor: graphics_clocks, versions: ['1', '2']}\n", "5:bisect.factor", "cannot set"),
        ("bisect: {factor: vars.vllm, versions: ['1', '2'], known: {bad: middle}}\n", "5:bisect.known.bad",
         "first or last"),
        ("bisect: {factor: vars.vllm, versions: ['1', '2'], posterior: 1.2}\n", "5:bisect.posterior", "(0.5, 1)"),
        ("bisect: {factor: vars.vllm, versions: ['1', '2'], speculate: 2}\n", "5:bisect.speculate", "[0, 1]"),
        ("bisect: {factor: vars.vllm, versions: ['1', '2'], speculate: yes}\n", "5:bisect.speculate", "got True"),
        ("bisect: {factor: vars.vllm, versions: ['1', '2'], min_rate: 0}\n", "5:bisect.min_rate", "(0, 1)"),
        ("bisect: {factor: vars.vllm, versions: ['1', '2'], min_rate: 20%}\n", "5:bisect.min_rate", "got '20%'"),
        ("search:\n  factor: env.X\n  levels: [1, 2]\n  levls: [3]\n", "8:search.levls", "did you mean 'levels'?"),
    ],
)
def test_a_bad_search_or_bisect_block_is_one_line_at_its_file_line_and_field(
        tmp_path: Path, body: str, where: str, words: str) -> None:
    path = write(tmp_path, body)
    with pytest.raises(PlaybookError) as caught:
        load_playbook(path)
    assert str(caught.value.location) == f"{path}:{where}"
    assert words in caught.value.reason


def test_a_level_the_cell_code_refuses_is_named_at_the_levels_line(tmp_path: Path) -> None:
    path = write(tmp_path, "search:\n  factor: power_limit\n  levels:\n    - 300\n    - 20000\n")
    with pytest.raises(PlaybookError) as caught:
        load_playbook(path)
    assert str(caught.value.location) == f"{path}:9:search.levels[1]" and "<= 10000 W" in caught.value.reason


def test_the_shipped_search_playbook_passes_a_dry_run(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    ws01:\n      ansible_host: 10.213.254.254\n")
    result = subprocess.run([sys.executable, "-m", "reprofleet", "campaign", "--hosts", str(inventory), "--playbook",
                             str(EXAMPLE), "--dry-run"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "search over graphics_clocks (safest first: 2200 MHz, 2400 MHz" in result.stdout
    assert "search-graphics_clocks-3000: gpu {'graphics_clocks': [180, 3000]}" in result.stdout


def test_the_shipped_bisect_playbook_passes_a_dry_run(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    ws01:\n      ansible_host: 10.213.254.254\n")
    result = subprocess.run([sys.executable, "-m", "reprofleet", "campaign", "--hosts", str(inventory), "--playbook",
                             str(EXAMPLE.with_name("bisect-vllm.yml")), "--dry-run"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "bisect over vars.vllm (0.25.1, 0.26.0; the oldest is the known bad)" in result.stdout
    assert "a bad version is assumed to reproduce at >= 0.2" in result.stdout
    assert "bisect-vllm-0.26.0" in result.stdout


def test_a_bisections_dry_run_says_its_versions_the_known_bad_and_where_it_stops(tmp_path: Path) -> None:
    from reprofleet.campaign.run import describe_plan, make_plan

    book = load_playbook(write(tmp_path, "bisect: {factor: vars.vllm, versions: ['0.25.1', '0.26.0'], "
                                         "known: {bad: last}, budget: {attempts: 30}}\n"))
    text = describe_plan(make_plan(book, [Host("ws1", "10.0.0.1")], "dry"))
    assert ("bisect over vars.vllm (0.25.1, 0.26.0; the newest is the known bad): versions chosen at run time until "
            "the change point's posterior reaches 0.95; budget 30 attempts; a bad version is assumed to reproduce at "
            ">= 0.2 (the known bad fails and the first good passes after 14 clean runs); a parallel host waits rather "
            "than run a probe worth under 0.5 of a fresh one") in text
    rarer = load_playbook(write(tmp_path, "bisect: {factor: vars.vllm, versions: ['0.25.1', '0.26.0'], min_rate: 0.1}\n"))
    assert "at >= 0.1 (the known bad fails and the first good passes after 29 clean runs)" in describe_plan(
        make_plan(rarer, [Host("ws1", "10.0.0.1")], "dry"))
    spec = ladder_plan(rarer.ladder, ["ws1"]).spec
    assert isinstance(spec, BisectSpec) and spec.min_bad_rate == 0.1
    assert "attempts planned: 2" in text  # one per version: what a host is prepared for, not the plan
