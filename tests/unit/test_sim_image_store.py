"""A host's data root is filled from the image store once, before its daemon's first start,
and never over what a daemon already keeps there (sim/image_store.py)."""

from __future__ import annotations

import os
from pathlib import Path

from reprofleet.sim import image_store


def make_store(root: Path) -> Path:
    store = root / "image-store-0123456789abcdef"
    (store / "image" / "overlay2" / "imagedb").mkdir(parents=True)
    (store / "image" / "overlay2" / "repositories.json").write_text('{"Repositories": {}}')
    layer = store / "overlay2" / "abc" / "diff"
    layer.mkdir(parents=True)
    (layer / "python3").write_text("interpreter")
    (store / "overlay2" / "l").mkdir()
    os.symlink("../abc/diff", store / "overlay2" / "l" / "SHORTID")
    return store


def test_an_empty_data_root_gets_the_image_store_and_nothing_else(tmp_path: Path) -> None:
    store, data = make_store(tmp_path), tmp_path / "data"
    data.mkdir()
    image_store.fill(store, data)
    assert sorted(p.name for p in data.iterdir()) == ["image", "overlay2"]
    assert (data / "image" / "overlay2" / "repositories.json").read_text() == '{"Repositories": {}}'
    assert os.readlink(data / "overlay2" / "l" / "SHORTID") == "../abc/diff"  # overlay2's short links kept as links
    assert (data / "overlay2" / "l" / "SHORTID" / "python3").read_text() == "interpreter"


def test_a_data_root_a_daemon_already_used_is_left_as_it_is(tmp_path: Path) -> None:
    store, data = make_store(tmp_path), tmp_path / "data"
    (data / "containers" / "c1").mkdir(parents=True)
    (data / "engine-id").write_text("its own")
    image_store.fill(store, data)
    assert sorted(p.name for p in data.iterdir()) == ["containers", "engine-id"]


def test_the_store_is_named_after_the_archive_it_was_loaded_from(tmp_path: Path) -> None:
    one = image_store.store_path(tmp_path, ["0.25.1"])
    assert one.parent == tmp_path and one.name.startswith("image-store-")
    assert one != image_store.store_path(tmp_path, ["0.25.1", "0.26.0"])  # other images, another store
    assert one == image_store.store_path(tmp_path, ["0.25.1", "0.25.1"])


def test_a_builder_daemon_a_killed_build_left_is_killed_and_its_folder_removed(tmp_path: Path) -> None:
    import subprocess
    import sys

    work = tmp_path / ".build-4242" / "load"
    work.mkdir(parents=True)
    # stands in for its dockerd: a session leader whose command line names its folder
    pause = "import signal; signal.pause()"  # lives until it is killed: by the sweep, or by the test's end
    left = subprocess.Popen([sys.executable, "-c", pause, "--data-root", str(work / "data")], start_new_session=True)
    other = subprocess.Popen([sys.executable, "-c", pause], start_new_session=True)
    try:
        (work / "dockerd.pid").write_text(f"{left.pid}\n")
        (tmp_path / ".build-4243" / "build").mkdir(parents=True)
        (tmp_path / ".build-4243" / "build" / "dockerd.pid").write_text(f"{other.pid}\n")  # not its daemon
        image_store.sweep_builds(tmp_path)
        assert left.wait(timeout=10) == -9
        assert other.poll() is None  # a pid whose command line is not that daemon's is left alone
        assert not list(tmp_path.glob(".build-*"))
    finally:
        for child in (left, other):
            child.kill()
            child.wait(timeout=10)
