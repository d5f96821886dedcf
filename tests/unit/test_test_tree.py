"""The test tree keeps its shape: every test module sits in the folder that names the seam it
drives (unit/, seam/, agent/, fleet/), never directly in tests/, and no test module imports
another. What tests share lives in tests/support/ (fixtures registered once in
tests/conftest.py); support modules and conftest are the only test code a test may import.

Both rules are read from the files with ast, every way Python has of importing: ``import``,
``from ... import`` (absolute, relative, or a bare name that worked while tests/ was on
sys.path), ``importlib.import_module``/``__import__`` of a constant, and ``pytest_plugins``.
Each rule is also shown to fail on a tree that breaks it.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

from tests.support.paths import TESTS

TOP_LEVEL_ALLOWED = {"__init__.py", "conftest.py"}


def python_files(tests: Path) -> list[Path]:
    """Every Python file of the test tree (the fixtures' scripts are data: tools run by tests)."""
    return sorted(p for p in tests.rglob("*.py") if "fixtures" not in p.relative_to(tests).parts)


def forbidden(tests: Path, path: Path) -> bool:
    """Whether ``path`` is test code no test module may import: anything but support/,
    a conftest.py or a package's __init__.py."""
    relative = path.relative_to(tests)
    return relative.parts[0] not in ("support", "fixtures") and path.name not in TOP_LEVEL_ALLOWED


def module_file(tests: Path, dotted: str) -> Path | None:
    """The file under ``tests`` that an absolute module name means, if any."""
    parts = dotted.split(".")
    if parts[0] != tests.name or len(parts) == 1:
        return None
    base = tests.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_names(tree: ast.Module) -> Iterator[tuple[int, int, str]]:
    """(line, relative level, dotted name) of everything the module imports or asks pytest to."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, 0, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            yield node.lineno, node.level, base
            for alias in node.names:  # ``from tests.unit import test_x``: a module, not a name
                yield node.lineno, node.level, f"{base}.{alias.name}" if base else alias.name
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in ("import_module", "__import__"):
                yield node.lineno, 0, node.args[0].value
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytest_plugins"
                                                  for t in node.targets):
            for constant in ast.walk(node.value):
                if isinstance(constant, ast.Constant) and isinstance(constant.value, str):
                    yield node.lineno, 0, constant.value


def imports_of_test_modules(tests: Path) -> list[str]:
    """``file:line imports name (target)`` for every import of one test module by another."""
    by_stem: dict[str, list[Path]] = {}
    for path in python_files(tests):
        if forbidden(tests, path):
            by_stem.setdefault(path.stem, []).append(path)
    found: dict[tuple[Path, int, Path], str] = {}
    for path in python_files(tests):
        for line, level, name in imported_names(ast.parse(path.read_text(), str(path))):
            if level:  # relative to the importing file's package
                package = path.parent
                for _ in range(level - 1):
                    package = package.parent
                targets = [t for t in (package.joinpath(*name.split(".")).with_suffix(".py"),
                                       package.joinpath(*name.split("."), "__init__.py")) if name and t.is_file()]
            elif name.split(".")[0] == tests.name:
                targets = [t for t in (module_file(tests, name),) if t is not None]
            else:  # a bare name, as when tests/ (or a folder of it) was on sys.path
                targets = by_stem.get(name.split(".")[0], [])
            for target in targets:
                if target != path and forbidden(tests, target):
                    found.setdefault((path, line, target), f"{path.relative_to(tests.parent)}:{line} imports "
                                                           f"{'.' * level}{name} ({target.relative_to(tests.parent)})")
    return sorted(found.values())


def loose_files(tests: Path) -> list[str]:
    """Python files directly in tests/ other than its conftest.py and __init__.py."""
    return sorted(p.name for p in tests.glob("*.py") if p.name not in TOP_LEVEL_ALLOWED)


def test_no_test_module_imports_another() -> None:
    assert imports_of_test_modules(TESTS) == [], "move what they share into tests/support/"


def test_no_test_file_sits_directly_in_tests() -> None:
    assert loose_files(TESTS) == [], "put it in the folder of the seam it drives: unit/, seam/, agent/ or fleet/"


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root / "tests"


def test_the_import_rule_finds_each_way_of_importing_a_test_module(tmp_path: Path) -> None:
    tests = _tree(tmp_path, {
        "tests/__init__.py": "", "tests/conftest.py": "pytest_plugins = ['tests.support.shared']\n",
        "tests/support/__init__.py": "", "tests/support/shared.py": "",
        "tests/unit/__init__.py": "", "tests/unit/test_b.py": "", "tests/unit/helper.py": "",
        "tests/fleet/__init__.py": "", "tests/fleet/conftest.py": "",
        "tests/unit/test_a.py": (
            "import importlib\n"
            "from tests.support.shared import x\n"  # allowed: support
            "from tests.support import shared\n"  # allowed: support
            "from tests import conftest\n"  # allowed: conftest
            "import tests.fleet.conftest\n"  # allowed: conftest
            "from tests.unit.test_b import y\n"  # 6
            "from tests.unit import test_b\n"  # 7
            "from .test_b import z\n"  # 8
            "from . import helper\n"  # 9
            "from test_b import w\n"  # 10: bare, as when tests/ was on sys.path
            "import tests.unit.helper\n"  # 11
            "pytest_plugins = ['tests.unit.test_b']\n"  # 12
            "def f():\n"
            "    from ..unit.test_b import v\n"  # 14: inside a function, two levels up
            "    return importlib.import_module('tests.unit.test_b')\n"),  # 15
    })
    lines = sorted(int(found.split(":")[1].split()[0]) for found in imports_of_test_modules(tests))
    assert lines == [6, 7, 8, 9, 10, 11, 12, 14, 15]
    assert "tests/unit/test_a.py:10 imports test_b (tests/unit/test_b.py)" in imports_of_test_modules(tests)


def test_the_placement_rule_finds_a_test_file_directly_in_tests(tmp_path: Path) -> None:
    tests = _tree(tmp_path, {"tests/__init__.py": "", "tests/conftest.py": "", "tests/unit/test_fine.py": "",
                             "tests/test_loose.py": "", "tests/helper.py": ""})
    assert loose_files(tests) == ["helper.py", "test_loose.py"]
