"""What docs/ARCHITECTURE.md says of the code's shape, checked against the code itself.

Each test reads the source (ast), never imports it: a statement in the document that stops
being true turns one of these red.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

from tests.support.paths import REPO

SRC = REPO / "src" / "reprofleet"
ARCHITECTURE = REPO / "docs" / "ARCHITECTURE.md"
HOST_CALLS = ("run", "exec_channel")  # what sends a command line to a host over a session


def _modules(*skip: str) -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if not rel.startswith(skip):
            yield path, ast.parse(path.read_text(), str(path))


def _imported_from_remote(tree: ast.Module) -> set[str]:
    """Names a module imports from reprofleet.remote (its command builders may be called anywhere)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("reprofleet.remote"):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def _raw_host_commands(path: Path, tree: ast.Module) -> list[str]:
    """Calls ``<session or shell>.run(X)`` / ``.exec_channel(X)`` whose X is a command line written
    here: a string, an f-string, a concatenation, or a call of a builder that is not remote/'s."""
    from_remote = _imported_from_remote(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in HOST_CALLS and node.args):
            continue
        receiver = ast.unparse(node.func.value).lower()
        if "session" not in receiver and "shell" not in receiver:
            continue
        command = node.args[0]
        built_here = isinstance(command, (ast.Constant, ast.JoinedStr, ast.BinOp)) or (
            isinstance(command, ast.Call) and isinstance(command.func, ast.Name) and command.func.id not in from_remote)
        if built_here:
            found.append(f"{path.relative_to(SRC)}:{node.lineno}: {ast.unparse(node)[:100]}")
    return found


def test_no_command_line_is_written_for_a_host_outside_remote() -> None:
    raw = [line for path, tree in _modules("remote/", "sim/") for line in _raw_host_commands(path, tree)]
    assert raw == [], "a host command belongs in remote/host_commands.py (with its parser and a golden case)"


def test_the_raw_command_check_can_fail() -> None:
    tree = ast.parse("def f(agent):\n    return agent.session.run(f'cat {x}', timeout=3)\n")
    assert _raw_host_commands(SRC / "x.py", tree)


class _QuarantineSites(ast.NodeVisitor):
    """The innermost function around each place a host's ``quarantined`` is set, or the
    ``quarantined`` event is passed to a call."""

    def __init__(self, module: str) -> None:
        self.module, self.stack, self.sites = module, [""], set()  # type: ignore[var-annotated]

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Assign(self, node: ast.Assign) -> None:
        if any(isinstance(t, ast.Attribute) and t.attr == "quarantined" for t in node.targets):
            self.sites.add(f"{self.module}:{self.stack[-1]}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if any(ast.unparse(a) == "CampaignEvent.QUARANTINED" for a in node.args):
            self.sites.add(f"{self.module}:{self.stack[-1]}")
        self.generic_visit(node)


def _quarantine_sites() -> list[str]:
    sites: set[str] = set()
    for path, tree in _modules("sim/"):
        visitor = _QuarantineSites(path.relative_to(SRC).as_posix())
        visitor.visit(tree)
        sites |= visitor.sites
    return sorted(sites)


def test_one_function_quarantines_a_host_and_it_says_so() -> None:
    assert _quarantine_sites() == ["runner/host.py:quarantine"]
    source = ast.unparse(next(f for f in ast.walk(ast.parse((SRC / "runner/host.py").read_text()))
                              if isinstance(f, ast.FunctionDef) and f.name == "quarantine"))
    assert "CampaignEvent.QUARANTINED" in source and "self.state.quarantined = reason" in source


def _imports(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):  # under TYPE_CHECKING too
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_recovery_does_not_import_the_host_runner() -> None:
    imports = _imports(ast.parse((SRC / "runner/recovery.py").read_text()))
    assert not {"reprofleet.runner.host", "reprofleet.runner.attempt_run"} & imports


def test_no_class_of_the_runner_is_over_400_lines_and_the_plan_loop_is_under_350() -> None:
    sizes = {f"{path.name}:{node.name}": node.end_lineno - node.lineno + 1  # type: ignore[operator]
             for path, tree in _modules() if path.parent.name == "runner"
             for node in tree.body if isinstance(node, ast.ClassDef)}
    assert max(sizes.values()) <= 400, sizes
    assert sizes["host.py:HostRunner"] <= 350


def test_the_campaign_context_is_filled_in_only_where_it_is_constructed() -> None:
    """No controller code assigns a CampaignContext field after construction (``ctx.x = ...``)."""
    assigned = [f"{path.relative_to(SRC)}:{node.lineno}" for path, tree in _modules("sim/")
                for node in ast.walk(tree) if isinstance(node, ast.Assign)
                for target in node.targets
                if isinstance(target, ast.Attribute) and ast.unparse(target.value) in ("ctx", "self.ctx")]
    assert assigned == []
    context = ast.parse((SRC / "runner/context.py").read_text())
    cls = next(n for n in context.body if isinstance(n, ast.ClassDef) and n.name == "CampaignContext")
    annotations = [ast.unparse(n.annotation) for n in cls.body if isinstance(n, ast.AnnAssign)]
    assert not [a for a in annotations if "Any" in a.split("[")[0].split("|")], annotations


def test_the_architecture_document_states_what_these_tests_check() -> None:
    text = ARCHITECTURE.read_text()
    for claim in ("no raw host command outside `remote/`", "one quarantine function", "no pipeline in `cli/`",
                  "does not import the host runner", "complete when it is constructed"):
        assert claim in text, claim
