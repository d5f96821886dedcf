"""From the wheel to the first dry run, outside the repository: the way a user meets reprofleet.

The wheel is built from this checkout, installed into a fresh venv under ``tmp_path``, and its
``reprofleet`` console script runs in empty folders there with no ``PYTHONPATH``: ``init``
writes the starter files, and the seed's playbook plans a dry run both from init's copy and,
from a folder holding only an inventory, by its built-in name, found in the installed
package's data. A wheel missing the examples or the PoC fails here.

Cheap on purpose: the wheel is built without build isolation (hatchling from the project's
venv; make's ``.[dev]`` installs it), and the new venv gets no packages of its own but the
wheel: a ``.pth`` line puts the project venv's site-packages after its own, so nothing is
downloaded. (``venv --system-site-packages`` would show the base interpreter's packages, not
the project venv's.) Where hatchling is absent, pip builds with isolation from its index.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

from tests.support.paths import REPO

SEED_FILES = ("reprofleet/_examples/playbooks/sm120-hostwedge.yml", "reprofleet/_examples/playbooks/poc/sm120_hostwedge.py",
              "reprofleet/_examples/inventory/blackwell.yml", "reprofleet/_collectors/agent.py")


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done


def _build_wheel(into: Path, env: dict[str, str]) -> Path:
    isolation = [] if importlib.util.find_spec("hatchling") is None else ["--no-build-isolation"]
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-q", "-w", str(into), str(REPO)], REPO, env)
    (wheel,) = into.glob("reprofleet-*.whl")
    return wheel


def _venv_with(wheel: Path, root: Path, env: dict[str, str]) -> Path:
    """A fresh venv holding only the wheel; the project venv's packages after its own."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(root)], root.parent, env)
    python = root / "bin" / "python"
    own = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    root.parent, env).stdout.strip())
    (own / "project-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
         root.parent, env)
    return root / "bin"


def test_the_wheel_installed_outside_the_repository_runs_init_and_the_seed_playbooks_dry_run(tmp_path: Path) -> None:
    began = time.monotonic()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    wheel = _build_wheel(tmp_path / "wheels", dict(os.environ))  # the backend where this process finds it
    built = time.monotonic()
    assert set(SEED_FILES) <= set(zipfile.ZipFile(wheel).namelist())
    bin_dir = _venv_with(wheel, tmp_path / "venv", env)
    installed = time.monotonic()
    where = _run([str(bin_dir / "python"), "-c", "import reprofleet; print(reprofleet.__file__)"], tmp_path, env)
    assert Path(where.stdout.strip()).is_relative_to(tmp_path / "venv")  # the wheel's copy, not the checkout's

    first = tmp_path / "first-night"
    first.mkdir()
    said = _run([str(bin_dir / "reprofleet"), "init", "--host", "ws1=192.0.2.11", "--driver", "shelly",
                 "--pdu", "192.0.2.101", "--user", "lab"], first, env)
    assert "doctor --cycle -i inventory.yml -p sm120-hostwedge.yml" in said.stdout
    assert sorted(p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file()) == [
        "inventory.yml", "poc/sm120_hostwedge.py", "sm120-hostwedge.yml"]
    copy = json.loads(_run([str(bin_dir / "reprofleet"), "campaign", "-i", "inventory.yml", "-p", "sm120-hostwedge.yml",
                            "--dry-run", "--json"], first, env).stdout)
    assert copy["dry_run"] is True and Path(copy["plan"]["playbook"]).resolve() == first / "sm120-hostwedge.yml"

    bare = tmp_path / "only-an-inventory"
    bare.mkdir()
    (bare / "hosts.yml").write_bytes((first / "inventory.yml").read_bytes())
    plan = json.loads(_run([str(bin_dir / "reprofleet"), "campaign", "-i", "hosts.yml", "-p", "sm120-hostwedge",
                            "--dry-run", "--json"], bare, env).stdout)
    book = Path(plan["plan"]["playbook"])  # found in the installed package's data, by its built-in name
    assert book.is_relative_to(tmp_path / "venv") and book.parts[-3:] == ("_examples", "playbooks",
                                                                          "sm120-hostwedge.yml")
    assert [h["name"] for h in plan["plan"]["hosts"]] == ["ws1"] and plan["dry_run"] is True
    ended = time.monotonic()
    print(f"wheel built {built - began:.1f} s, venv and install {installed - built:.1f} s, init and two dry runs "
          f"{ended - installed:.1f} s, in all {ended - began:.1f} s")
