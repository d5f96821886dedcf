"""Cache modes in a playbook: ``poc.cache`` and a cell's own ``cache:``, checked before any
host is contacted; a cell's own mode joins its identity, the playbook default does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprofleet.runner.context import cell_identity
from reprofleet.errors import PlaybookError
from reprofleet.playbook import load_playbook


def book(tmp_path: Path, poc: str, cells: str) -> Path:
    (tmp_path / "poc.py").write_text("print('poc')\n")
    (tmp_path / "seed").mkdir(exist_ok=True)
    path = tmp_path / "book.yml"
    path.write_text(f"name: t\npoc: {{script: poc.py{poc}}}\nattempts: 1\nmatrix:\n{cells}")
    return path


def test_a_cell_may_run_under_its_own_cache_mode(tmp_path: Path) -> None:
    loaded = load_playbook(book(tmp_path, ", cache: seeded, cache_source: seed",
                                "  - name: a\n  - name: b\n    cache: fresh\n  - name: c\n    cache: seeded\n"))
    assert [loaded.poc.mode(c) for c in loaded.cells] == ["seeded", "fresh", "seeded"]
    assert [c.factors.get("cache") for c in loaded.cells] == [None, "fresh", None]


def test_a_cell_that_says_the_default_keeps_the_identity_it_had_before_modes_existed(tmp_path: Path) -> None:
    plain = load_playbook(book(tmp_path, "", "  - name: a\n"))
    said = load_playbook(book(tmp_path, "", "  - name: a\n    cache: persistent\n"))
    other = load_playbook(book(tmp_path, "", "  - name: a\n    cache: fresh\n"))
    ids = [cell_identity(b.cells[0], "poc") for b in (plain, said, other)]
    assert ids[0] == ids[1] != ids[2]


@pytest.mark.parametrize("poc, cells, where, words", [
    (", cache: seeded", "  - name: a\n", "2:poc.cache", "cache_source"),
    ("", "  - name: a\n  - name: b\n    cache: seeded\n", "7:matrix[1].cache", "cache_source"),
    ("", "  - name: a\n    cache: seedd\n", "6:matrix[0].cache", "did you mean 'seeded'"),
    (", cache: warm", "  - name: a\n", "2:poc.cache", "persistent, fresh, seeded"),
])
def test_a_bad_cache_mode_names_file_line_and_field(tmp_path: Path, poc: str, cells: str, where: str,
                                                    words: str) -> None:
    with pytest.raises(PlaybookError) as caught:
        load_playbook(book(tmp_path, poc, cells))
    assert f"book.yml:{where}" in str(caught.value) and words in str(caught.value)


def test_the_dry_run_says_per_host_what_would_be_pushed_run_and_pulled(tmp_path: Path) -> None:
    from reprofleet.campaign import run as campaign
    from reprofleet.model import Host

    path = book(tmp_path, ", cache: seeded, cache_source: seed", "  - name: a\n  - name: b\n    cache: fresh\n")
    (tmp_path / "seed" / "graph.py").write_text("x" * 1000)
    (tmp_path / "seed" / "autotune.json").write_text("{}")
    plan = campaign.make_plan(load_playbook(path), [Host("h1", "10.0.0.1"), Host("h2", "10.0.0.2")], "dry")
    text = campaign.describe_plan(plan)
    for host in ("h1", "h2"):
        assert f"{host}: push up to agent " in text
        assert f"{host}: run 2 attempts: a x1 (seeded), b x1 (fresh)" in text
        assert f"{host}: pull its facts and one event stream per attempt (2)" in text
    assert "seeded snapshot up to 2 files/1002 B" in text
