"""The command line stays thin (docs/ARCHITECTURE.md, "The command line is thin"): cli/ parses
flags, calls one function of the layer that owns the work and prints what comes back.

A pipeline needs what the layers below hand out: it reads a playbook, an inventory or the
records, plans or runs a campaign, judges, renders or writes a file. So a module of cli/
that names one of those (imported, or reached as ``module.name``) or writes a file itself is
a pipeline in the wrong place. The other way round, the modules that hold the pipelines
never import rich or Invoke: they return data, and cli/ draws it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "reprofleet"

# What only a pipeline uses: the layers below keep these, and cli/ asks them for results.
PIPELINE_NAMES = frozenset({
    "run_campaign", "make_plan", "completed_counts", "describe_plan",  # campaign/run.py: plan and run
    "check_playbook_against_hosts", "power_states_at_start", "readiness_lines",  # campaign/preflight.py, facts.py
    "load_playbook", "load_inventory", "limited",  # the input files
    "load_pool", "read_records", "folded", "judge",  # the records and their verdicts
    "render_markdown", "render_html", "issue_markdown", "compare_html", "search_report",  # the reports
    "write_atomic", "write_csv", "write_jsonl", "write_parquet", "cache_facts", "CampaignDir",  # files written
    "write_text", "write_bytes", "mkdir", "open",  # ... or by hand (and os.replace, below: str.replace is no write)
})
# Modules cli/ may not import at all: the record store, and the campaign run as a module to reach into.
PIPELINE_MODULES = frozenset({"reprofleet.records.store", "reprofleet.records.pooling", "reprofleet.campaign.run",
                              "reprofleet.report.html", "reprofleet.report.markdown"})
PIPELINES = ("campaign/pipeline.py", "campaign/planning.py", "campaign/settings.py", "report/write.py",
             "report/export.py")


def _type_only(tree: ast.Module) -> set[int]:
    """Line numbers of imports under ``if TYPE_CHECKING:`` (names for annotations, never called)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            lines.update(child.lineno for child in ast.walk(node) if isinstance(child, (ast.Import, ast.ImportFrom)))
    return lines


def pipeline_uses(source: str) -> list[str]:
    """What in a cli/ module's source belongs to a pipeline: one ``line: what`` per use."""
    tree = ast.parse(source)
    type_only = _type_only(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.lineno not in type_only:
            module = node.module or ""
            for alias in node.names:
                if module in PIPELINE_MODULES or f"{module}.{alias.name}" in PIPELINE_MODULES \
                        or alias.name in PIPELINE_NAMES:
                    found.append(f"{node.lineno}: from {module} import {alias.name}")
        elif isinstance(node, ast.Import) and node.lineno not in type_only:
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name in PIPELINE_MODULES]
        elif isinstance(node, ast.Attribute) and (node.attr in PIPELINE_NAMES or (
                node.attr == "replace" and isinstance(node.value, ast.Name) and node.value.id == "os")):
            found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PIPELINE_NAMES:
            found.append(f"{node.lineno}: {node.func.id}()")
    return found


def test_no_module_of_cli_reads_records_runs_a_campaign_or_writes_a_report() -> None:
    offenders = {str(p.relative_to(PACKAGE)): uses for p in sorted((PACKAGE / "cli").glob("*.py"))
                 if (uses := pipeline_uses(p.read_text()))}
    assert offenders == {}


def test_the_check_finds_a_report_written_from_the_command_line() -> None:
    written_here = ("from reprofleet.records.store import write_atomic\n"
                    "def report(c):\n    write_atomic(path, render_markdown(judge(pool)))\n")
    assert pipeline_uses(written_here) == ["1: from reprofleet.records.store import write_atomic",
                                           "3: write_atomic()", "3: render_markdown()", "3: judge()"]
    run_here = "from reprofleet.campaign import run as run_mod\nresult = run_mod.run_campaign(plan, settings, root)\n"
    assert pipeline_uses(run_here) == ["1: from reprofleet.campaign import run", "2: .run_campaign"]
    assert pipeline_uses("if TYPE_CHECKING:\n    from reprofleet.campaign.run import CampaignResult\n") == []
    assert pipeline_uses("os.replace(temp, out)\nname = text.replace('-', '_')\n") == ["1: .replace"]


def test_the_pipelines_return_data_and_never_import_rich_or_invoke() -> None:
    drawing = {}
    for name in PIPELINES:
        tree = ast.parse((PACKAGE / name).read_text())
        roots = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names}
        roots |= {node.module.split(".")[0] for node in ast.walk(tree)
                  if isinstance(node, ast.ImportFrom) and node.module and not node.level}
        if roots & {"rich", "invoke"}:
            drawing[name] = sorted(roots & {"rich", "invoke"})
    assert drawing == {}
