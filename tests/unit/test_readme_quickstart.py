"""README.md's first sections ("The two commands", "Quickstart on a real fleet") walked as a new
user would: every ``invoke ...`` command parses through Invoke's own parser with the
project's collection (the task exists, every flag exists and gets its value), every ``make X``
is a Makefile target, every repository path it names exists, every ``#anchor`` it links to is
a heading, and the dry run of step 3 runs as written and lists the example inventory's hosts.

What is read: inline code spans and indented code lines of those sections (a span may wrap
onto the next line, as Markdown allows). Words in capitals (INVENTORY, N) and ``<...>`` are
placeholders: values, never checked as paths; paths under ``reports/`` or ``~`` are what a
campaign or the user writes, not the repository's.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from invoke import Program
from invoke.parser import ParseError, Parser, ParserContext

from reprofleet.cli.tasks import ns
from tests.support.paths import REPO as ROOT

SECTIONS = ("The two commands", "Quickstart on a real fleet")
NOT_THE_REPOS = ("reports/", "~", "streams/", "group_vars/", "host_vars/")  # written by a run, or Ansible's words


def section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def walked(text: str) -> str:
    return "".join(section(text, title) for title in SECTIONS)


def code_spans(text: str) -> list[str]:
    """Inline code (whitespace and line breaks inside one folded to a space) and indented code lines."""
    spans = [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", text)]
    blocks = [line.strip().split("#", 1)[0].strip() for line in text.splitlines() if line.startswith("    ")
              and not line.lstrip()[:2].rstrip(".").isdigit() and line.strip()]
    return spans + [b for b in blocks if b]


def invoke_commands(spans: list[str], programs: tuple[str, ...] = ("invoke ",)) -> list[list[str]]:
    """The commands' arguments; ``reprofleet ...`` (from the wheel) runs the same tasks as ``invoke ...``."""
    return [shlex.split(span)[1:] for span in spans if span.startswith(programs)]


def make_targets(spans: list[str]) -> list[str]:
    return [span.split()[1] for span in spans if span.startswith("make ") and len(span.split()) > 1]


def repo_paths(spans: list[str], links: list[str]) -> list[str]:
    """Words that name a file or folder of the repository (a ``/`` in them, no placeholder);
    a ``*`` in one is a glob that must match."""
    words = {word.rstrip(".,;:)") for span in spans for word in span.split()} | set(links)
    return sorted(word for word in words if "/" in word and not re.search(r"[<>:]|^-", word)
                  and not any(re.fullmatch(r"[A-Z_]+", part) for part in word.split("/"))
                  and not word.startswith(NOT_THE_REPOS))


def flag_pairs(spans: list[str]) -> list[tuple[str, str]]:
    """``-i/--inventory``: the short and long name of one flag, as the README lists them."""
    return [tuple(span.split("/")) for span in spans if re.fullmatch(r"-\w/--[\w-]+", span)]  # type: ignore[misc]


def exists_in_repo(path: str) -> bool:
    return any((base / path).exists() for base in (ROOT, ROOT / "src" / "reprofleet"))


def parse(argv: list[str]) -> list[ParserContext]:
    """Invoke's parser with the project's tasks: a ParseError for an unknown task or flag, a
    flag without its value, or a value a flag does not take."""
    core = ParserContext(args=Program(namespace=ns, name="reprofleet", binary="reprofleet").core_args())
    return list(Parser(initial=core, contexts=ns.to_contexts()).parse_argv(argv))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


README = (ROOT / "README.md").read_text()
TEXT = walked(README)
SPANS = code_spans(TEXT)
LINKS = re.findall(r"\]\(([^)#][^)]*)\)", TEXT)


def test_the_walk_finds_the_commands_a_new_user_types() -> None:
    commands = [" ".join(argv[:1]) for argv in invoke_commands(SPANS)]
    assert {"facts", "campaign", "report"} <= set(commands), commands
    assert set(make_targets(SPANS)) >= {"demo", "test", "coverage"}
    assert {"inventory/blackwell.yml", "docs/ARCHITECTURE.md", "tests/seam/test_seam_*.py"} <= set(repo_paths(SPANS, LINKS))
    assert ("-i", "--inventory") in flag_pairs(SPANS)


@pytest.mark.parametrize("argv", invoke_commands(SPANS, ("invoke ", "reprofleet ")), ids=" ".join)
def test_each_invoke_command_parses_with_the_projects_tasks(argv: list[str]) -> None:
    tasks = {context.name for context in ns.to_contexts()} | {alias for context in ns.to_contexts()
                                                             for alias in context.aliases}
    try:
        parsed = parse(argv)
    except ParseError as exc:
        pytest.fail(f"README: `invoke {' '.join(argv)}`: {exc}")
    named = [context.name for context in parsed[1:]]
    assert named and set(named) <= tasks, (argv, named)


@pytest.mark.parametrize("target", make_targets(SPANS))
def test_each_make_target_is_in_the_makefile(target: str) -> None:
    assert re.search(rf"^{re.escape(target)}:", (ROOT / "Makefile").read_text(), re.M), f"README: make {target}"


@pytest.mark.parametrize("path", repo_paths(SPANS, LINKS))
def test_each_path_it_names_is_in_the_repository(path: str) -> None:
    assert exists_in_repo(path) or any(ROOT.glob(path)), f"README names {path}, which is not in the repository"


@pytest.mark.parametrize("short, long", flag_pairs(SPANS))
def test_each_flag_it_lists_is_one_flag_of_a_task(short: str, long: str) -> None:
    names = {tuple(arg.names) for context in ns.to_contexts() for arg in context.args.values()}
    assert any(long[2:] in found and short[1:] in found for found in names), f"README: {short}/{long}"


def test_each_anchor_it_links_to_is_a_heading() -> None:
    headings = {slug(line.lstrip("#")) for line in README.splitlines() if line.startswith("#")}
    anchors = re.findall(r"\]\(#([^)]+)\)", TEXT)
    assert anchors and not [a for a in anchors if a not in headings]


def test_the_dry_run_of_step_3_runs_as_written(tmp_path: Path) -> None:
    """Step 3, with the secrets the example inventory names (step 1 says to keep them in env:/file:)."""
    [argv] = [a for a in invoke_commands(SPANS) if a[:1] == ["campaign"] and "--dry-run" in a]
    (tmp_path / ".config" / "reprofleet").mkdir(parents=True)
    (tmp_path / ".config" / "reprofleet" / "apc-community").write_text("walk-community\n")
    (tmp_path / ".config" / "reprofleet" / "apc-community").chmod(0o600)  # a secret file others can read is refused
    env = {**os.environ, "HOME": str(tmp_path), "WS01_PLUG": "walk:pw", "WS03_BMC": "admin:walk-pw",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "reprofleet", *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    # "prints the hosts, cells, attempts and a duration bound"
    for words in ("hosts (4): ws01 (", "cells (10)", "attempts planned: 240", "duration: at most"):
        assert words in done.stdout, (words, done.stdout)
