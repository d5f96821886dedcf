"""The layer order of docs/ARCHITECTURE.md holds in the code: contracts kept, no import cycle,
the host side and the simulator independent of the controller, every module on the map."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import grimp
import pytest
from tests.support.paths import REPO

PACKAGE = REPO / "src" / "reprofleet"
ARCHITECTURE = REPO / "docs" / "ARCHITECTURE.md"


def import_cycles(package: str) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), TYPE_CHECKING imports included."""
    graph = grimp.build_graph(package)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0

    def visit(module: str) -> None:
        nonlocal counter
        index[module] = low[module] = counter
        counter += 1
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def test_the_layer_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "BROKEN" not in result.stdout


def test_no_module_imports_itself_back_through_others() -> None:
    assert import_cycles("reprofleet") == []


def test_the_cycle_finder_finds_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "cyclic"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from cyclic import b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cyclic import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("cyclic") == [["cyclic.a", "cyclic.b"]]


def _imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_host_side_imports_nothing_of_the_controller() -> None:
    offenders = [str(p.relative_to(REPO)) for p in (REPO / "collectors").rglob("*.py")
                 if "reprofleet" in _imported_roots(p)]
    assert offenders == []


def test_the_top_level_of_the_package_holds_only_leaf_modules() -> None:
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(modules) <= 8, modules


def _named_paths() -> set[str]:
    """Every `path.py` or `folder/` that ARCHITECTURE.md names in backticks (under src/reprofleet or the repo)."""
    text = ARCHITECTURE.read_text()
    return {m.rstrip("/") for m in re.findall(r"`([a-z_][a-z0-9_/]*(?:\.py|/))`", text)}


def test_every_module_the_architecture_names_exists() -> None:
    missing = sorted(name for name in _named_paths() if not (PACKAGE / name).exists() and not (REPO / name).exists())
    assert missing == []


def test_every_package_and_module_of_the_controller_is_on_the_map() -> None:
    named = _named_paths()
    unnamed = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "sim" and len(rel.parts) > 2:
            continue  # the simulator's inner modules are its own business; sim/ and its packages are named
        if path.name == "__init__.py":
            if rel.parent != Path("."):
                key = str(rel.parent)
                if key not in named:
                    unnamed.append(key + "/")
        elif rel.parts[0] != "sim" and str(rel) not in named:
            unnamed.append(str(rel))
    assert unnamed == []


def test_every_package_docstring_lists_its_modules() -> None:
    unlisted = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        if "sim" in init.relative_to(PACKAGE).parts or init.parent == PACKAGE:
            continue
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        for module in sorted(init.parent.glob("*.py")):
            if module.name != "__init__.py" and f"``{module.stem}``" not in doc:
                unlisted.append(f"{init.parent.relative_to(PACKAGE)}/{module.name}")
        for sub in sorted(p.parent for p in init.parent.glob("*/__init__.py")):
            if f"``{sub.name}``" not in doc:
                unlisted.append(f"{init.parent.relative_to(PACKAGE)}/{sub.name}/")
    assert unlisted == []
