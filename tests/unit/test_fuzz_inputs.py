"""Generated and mutated inventories and playbooks: each loads, or fails with one line that
names the file, the line and the field. Never a traceback, never a silent wrong load.

Mutations start from the files we ship (the seed's playbook, the annotated inventory), since
real typos are small edits of a good file: a line dropped or doubled, a value replaced, a key
misspelt, indentation shifted, a file cut short. And hostile ones, as a CMDB export or a
test host could send: a leading dash (an ssh option), NUL, an alias bomb, ``.nan``, 10**100;
the host's side is fuzzed at the same seam as the hostile-host suite (a manifest entry, a
stream line), where every input is accepted with its invariants or refused with our error.
The counts are printed at the end of the run (hostile_counts.py).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.hostile_host import COUNTS
from reprofleet.errors import AgentError, InputError
from reprofleet.inventory import load_inventory
from reprofleet.playbook import TOP_KEYS, load_playbook
from reprofleet.remote.agent import parse_event
from reprofleet.runner import cache_sync
from tests.support.paths import REPO

SEED_PLAYBOOK = REPO / "playbooks" / "sm120-hostwedge.yml"
INVENTORY = REPO / "inventory" / "blackwell.yml"
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

SCALARS = st.sampled_from(["-1", "0", "1", "true", "null", "[]", "{}", "'x'", "1e999", "abc", "[1, 2, 3]",
                           "{a: 1}", "\"🙂\"", "0x10", "'0.25.1'", "[180, 2800]", "[2800, 180]", "-3.5",
                           "~", "''", "[[1]]", "*anchor", "&a 1", "!!binary aGk=", "2026-11-30",
                           # hostile: an ssh option, NUL, not-a-number, a 101-digit integer, a loop
                           "-oProxyCommand=touch /tmp/owned", "'--help'", "\"a\\0b\"", ".nan", ".inf", "-.inf",
                           "1" + "0" * 100, "-1" + "0" * 100, "&l [*l]", "\"{0}%s\""])
BOMB = ["bomb0: &b0 [x, x, x, x, x, x, x, x, x, x]"] + [
    f"bomb{n}: &b{n} [{', '.join([f'*b{n - 1}'] * 10)}]" for n in range(1, 9)]  # 10**9 values, ~500 bytes


@st.composite
def mutation(draw: Any, lines: list[str]) -> list[str]:
    """One small edit of a good file, as a person's typo would make."""
    out = list(lines)
    i = draw(st.integers(0, len(out) - 1))
    kind = draw(st.sampled_from(["drop", "double", "value", "key", "indent", "cut", "char", "bomb", "deep"]))
    if kind == "drop":
        del out[i]
    elif kind == "double":
        out.insert(i, out[i])
    elif kind == "value" and ":" in out[i]:
        out[i] = out[i].split(":", 1)[0] + ": " + draw(SCALARS)
    elif kind == "key":
        match = re.match(r"^(\s*-?\s*)([A-Za-z_][\w.-]*)(:.*)$", out[i])
        if match:
            key = match.group(2)
            typo = draw(st.sampled_from([key[:-1], key + "s", key.upper(), key.replace("_", "-"), "unknown_key"]))
            out[i] = match.group(1) + (typo or "x") + match.group(3)
    elif kind == "indent":
        out[i] = draw(st.sampled_from(["", " ", "   ", "\t"])) + out[i].lstrip()
    elif kind == "bomb":
        out[i + 1:i + 1] = BOMB if not out[i].startswith(" ") else [" " * 2 + line for line in BOMB]
    elif kind == "deep":
        out.append("deep: " + "[" * 200 + "]" * 200)
    elif kind == "cut":
        out = out[: i + 1]
        out[-1] = out[-1][: draw(st.integers(0, len(out[-1])))]
    else:
        position = draw(st.integers(0, len(out[i])))
        out[i] = out[i][:position] + draw(st.sampled_from(["{", "[", ":", "\"", "'", "#", "&", "*", "%", "@", "\x00"])) + out[i][position:]
    return out


def _is_one_clear_line(error: InputError, file: Path) -> None:
    text = str(error)
    assert "\n" not in text.strip(), text
    assert text.startswith(str(file)), text
    assert error.location.line is not None, f"no line number: {text}"
    syntax = "YAML" in error.reason or "INI" in error.reason or "cannot read" in error.reason or "encod" in error.reason
    assert error.location.field or syntax, f"no field named: {text}"


def _loads_or_fails_clearly(load: Callable[[Path], Any], file: Path) -> None:
    COUNTS["fuzz"] += 1
    try:
        load(file)
    except InputError as error:
        _is_one_clear_line(error, file)
    except BaseException:
        COUNTS["fuzz_tracebacks"] += 1
        raise


@pytest.fixture(scope="module")
def playbook_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fuzz-playbook")
    shutil.copytree(SEED_PLAYBOOK.parent / "poc", folder / "poc")
    return folder


@FUZZ
@given(data=st.data())
def test_a_mutated_seed_playbook_loads_or_names_file_line_and_field(playbook_dir: Path, data: st.DataObject) -> None:
    lines = data.draw(mutation(SEED_PLAYBOOK.read_text().splitlines()))
    file = playbook_dir / "mutated.yml"
    file.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")
    _loads_or_fails_clearly(load_playbook, file)


JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-5, 5000) | st.floats(allow_nan=False) | st.text(max_size=8),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                       max_leaves=8)


@FUZZ
@given(document=st.dictionaries(st.sampled_from(TOP_KEYS + ("atempts", "matrx", "stop")), JSONISH, max_size=8))
def test_a_generated_playbook_loads_or_names_file_line_and_field(playbook_dir: Path, document: dict) -> None:
    file = playbook_dir / "generated.yml"
    file.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    _loads_or_fails_clearly(load_playbook, file)


@FUZZ
@given(data=st.data())
def test_a_mutated_inventory_loads_or_names_file_line_and_field(tmp_path_factory: pytest.TempPathFactory,
                                                              data: st.DataObject) -> None:
    lines = data.draw(mutation(INVENTORY.read_text().splitlines()))
    file = tmp_path_factory.mktemp("fuzz-inventory") / "hosts.yml"
    file.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")
    _loads_or_fails_clearly(load_inventory, file)


INI_LINES = st.lists(st.sampled_from(["[lab]", "[lab:vars]", "[lab:children]", "ws01 ansible_host=10.0.0.1",
                                      "ws[01:03]", "ws[03:01]", "ws02 pdu=notjson", "ansible_user=lab",
                                      "gpu_index=x", "gpu_index=1", "  indented", "=", "[", "ws01 ansible_port=abc",
                                      "office", "# comment", ""]), max_size=10)


@FUZZ
@given(lines=INI_LINES)
def test_a_generated_ini_inventory_loads_or_names_file_line_and_field(tmp_path_factory: pytest.TempPathFactory,
                                                                     lines: list[str]) -> None:
    file = tmp_path_factory.mktemp("fuzz-ini") / "hosts.ini"
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _loads_or_fails_clearly(load_inventory, file)


HOSTILE_PART = st.sampled_from(["..", ".", "", "-rf", "a", "\x00", "/", "\\", "~", "$(id)", "n" * 256, "ü", "a b"])
HOSTILE_NUMBER = st.one_of(st.integers(-2, 1 << 42), st.sampled_from([10 ** 100, -(10 ** 100), 0o4755, 0o7777, True]),
                           st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4), st.none())


@FUZZ
@given(parts=st.lists(HOSTILE_PART, min_size=1, max_size=5), lead=st.sampled_from(["", "/", "./", "../"]),
       size=HOSTILE_NUMBER, mode=HOSTILE_NUMBER,
       digest=st.one_of(st.text(alphabet="0123456789abcdefABCDEF", min_size=60, max_size=66), HOSTILE_NUMBER))
def test_a_hostile_manifest_entry_is_checked_or_refused_naming_its_field(tmp_path_factory: pytest.TempPathFactory,
                                                                        parts: list[str], lead: str, size: Any,
                                                                        mode: Any, digest: Any) -> None:
    staging = tmp_path_factory.getbasetemp() / "staging"
    entry = {"path": lead + "/".join(parts), "size": size, "mode": mode, "sha256": digest}
    COUNTS["fuzz"] += 1
    try:
        checked = cache_sync.checked_entry("ws01", 3, entry, staging)
    except cache_sync.ManifestRefused as error:
        assert str(error).startswith("ws01: cache pull refused: manifest entry 3") and "\n" not in str(error)
        return
    except BaseException:
        COUNTS["fuzz_tracebacks"] += 1
        raise
    assert (staging / checked.path).resolve().is_relative_to(staging.resolve())
    assert 0 <= checked.mode <= 0o777 and 0 <= checked.size <= cache_sync.MAX_FILE_BYTES
    assert not checked.path.startswith("/") and ".." not in checked.path.split("/")


STREAM_VALUE = st.one_of(HOSTILE_NUMBER, st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3),
                                                                                           st.integers(), max_size=2))
STREAM_LINE = st.fixed_dictionaries(
    {"k": st.one_of(st.sampled_from(["phase", "exit", "started", "sample", "error", "notice", "stderr"]), STREAM_VALUE)},
    optional={"t": STREAM_VALUE, "seq": STREAM_VALUE, "code": STREAM_VALUE, "phase": STREAM_VALUE,
              "outcome": STREAM_VALUE, "error": STREAM_VALUE})


@FUZZ
@given(raw=st.one_of(st.binary(max_size=200).map(lambda b: b.decode("utf-8", "surrogateescape")),
                     STREAM_LINE.map(lambda v: __import__("json").dumps(v))))
def test_a_hostile_stream_line_is_an_event_or_an_agent_error(raw: str) -> None:
    COUNTS["fuzz"] += 1
    try:
        parse_event("ws01", raw)
    except AgentError as error:
        assert str(error).startswith("ws01: agent: ")
    except BaseException:
        COUNTS["fuzz_tracebacks"] += 1
        raise


# -- a host's text through every output channel (issue 34) ----------------------------------------
# Pieces a hostile host would mix: escape starts (7-bit and C1), terminators, rich markup, Markdown,
# formula starts, quotes for the Prometheus label, bytes that were not UTF-8 (surrogateescape).
HOSTILE_PIECE = st.sampled_from(["\x1b", "\x1b[", "\x1b]", "\x1bP", "\x1bc", "\x9b", "\x9d", "\x90", "\x9c", "\x07",
                                 "\x00", "\r", "\n", "\t", "\x7f", "\u202e", "\udcff", "]8;;https://evil.example/",
                                 "\\", "0m", "2J", "31m", ";", "[", "]", "[/]", "[bold red]", "[link=https://e.x]",
                                 "`", "``", "[a](https://evil.example)", "![i](https://evil.example/p.png)", "<img>",
                                 "# ", "*", "_", "~", "|", "&amp;", "=", "+", "-", "@", "\"", "}", "{", "x", " ", "ü"])
HOST_TEXT = st.one_of(st.lists(HOSTILE_PIECE, max_size=12).map("".join), st.text(max_size=40))
TAGS = re.compile(r"<(/?)([a-z0-9]+)")


def _terminal_shows(text: str) -> str:
    """What a terminal shows of a host's text drawn as a line, a facts table and a live table row."""
    import io

    from rich.console import Console

    from reprofleet.cli.progress import LiveProgress
    from reprofleet.cli.tables import facts_table, policy_table
    from reprofleet.cli.terminal_text import cell, plain

    shown = io.StringIO()
    terminal = Console(file=shown, width=160, color_system=None)
    terminal.print(cell(text), soft_wrap=True)
    line = shown.getvalue()
    assert line == plain(text) + "\n", "a host's line was not shown exactly as its inert text"
    facts = {"ws1": {"kernel": text, "boot_id": text, "gpus": [{"name": text, "vbios": text}], "dmi": {"board_name": text}},
             "ws2": AgentError("ws2", text)}
    terminal.print(facts_table(facts), policy_table({"ws1": {"graphics_clocks": text, "host_debug": {text: 1}}}))
    live = LiveProgress(["ws1"], {"ws1": 3}, terminal, plain=True)
    live("ws1", status=text, cell=text, phase=text, outcome=text, counts={text: 1})
    terminal.print(live.render())
    return shown.getvalue()


def _markdown_tags(markdown: str) -> set[str]:
    from markdown_it import MarkdownIt

    return {name for _, name in TAGS.findall(MarkdownIt("commonmark").enable("table").render(markdown))}


@FUZZ
@given(text=HOST_TEXT)
def test_a_hosts_text_reaches_no_channel_as_a_control_markup_or_formula(text: str) -> None:
    """Terminal, report.md, CSV, notifications, metrics.prom: no control character, no markup or
    formula of the host's, and no exception (the figure is printed with the fuzz count)."""
    import csv
    import io

    from reprofleet.campaign import notify_text
    from reprofleet.records.csv_cells import FORMULA_START, text_cell
    from reprofleet.records.prometheus import Family, render, sample
    from reprofleet.report.markdown_text import code_block, code_span, prose

    COUNTS["fuzz"] += 1
    try:
        shown = _terminal_shows(text)
        assert [ch for ch in shown if (ord(ch) < 0x20 and ch != "\n") or 0x7f <= ord(ch) <= 0x9f] == []
        for markdown in (f"- {code_span(text, in_table=False)}", f"> {prose(f'why: {text}. end', [text], in_table=False)}",
                         f"| a |\n| --- |\n| {prose(text, [text])} |", "\n".join(code_block(text))):
            assert _markdown_tags(markdown) <= {"code", "ul", "li", "blockquote", "p", "table", "thead", "tbody", "tr",
                                                "th", "td", "pre"}, markdown
        for note in (notify_text.quoted(text), notify_text.line_quoting(f"cell: {text}", [text]), notify_text.body(text)):
            assert not any(ord(ch) < 0x20 and ch not in "\t\n" or 0x7f <= ord(ch) <= 0x9f for ch in note)
        assert _markdown_tags(notify_text.quoted(text)) <= {"p", "code"}
        value = text_cell(text)
        assert not value.startswith(FORMULA_START) or re.fullmatch(r"[+-][\d.eE+-]*", value)
        out = io.StringIO()
        csv.writer(out).writerow([value])
        assert next(csv.reader(io.StringIO(out.getvalue()))) == [value]
        prom = render([Family("reprofleet_fuzz", text, "gauge", (sample(1, host=text),))])
        assert len(prom.splitlines()) == 3 and all(0x20 <= ord(ch) or ch in "\t\n" for ch in prom)
    except BaseException:
        COUNTS["fuzz_tracebacks"] += 1
        raise


@FUZZ
@given(chunks=st.lists(st.one_of(st.binary(max_size=40), HOST_TEXT.map(lambda t: t.encode("utf-8", "surrogateescape"))),
                       max_size=6))
def test_a_hosts_stream_bytes_leave_the_agent_as_lines_without_an_escape(chunks: list[bytes]) -> None:
    """The agent's splitter is the first sanitizer a PoC's output meets: whatever the bytes, no
    line it files keeps a control character (so log lines, report.md and the CSV keep none)."""
    from tests.support.agent_harness import collector

    splitter = collector("text_lines").LineSplitter()
    COUNTS["fuzz"] += 1
    try:
        lines = [line for chunk in chunks for line, _ in splitter.feed(chunk, now=0.0)] + \
            [line for line, _ in splitter.flush()]
        for line in lines:
            assert not any((ord(ch) < 0x20 and ch != "\t") or 0x7f <= ord(ch) <= 0x9f for ch in line), line
        for line in lines:  # and each line through the terminal as the live view shows a phase
            _terminal_shows(line)
    except BaseException:
        COUNTS["fuzz_tracebacks"] += 1
        raise
