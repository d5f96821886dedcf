"""Pure pieces under the agent's streams: output splitting, the events file, old Pythons."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import agent_harness as h

text_lines = h.collector("text_lines")
event_log = h.collector("event_log")


def test_newlines_crlf_and_carriage_returns_all_end_lines() -> None:
    splitter = text_lines.LineSplitter()
    assert splitter.feed(b"a\nb\r\nc\r\rd\n\n", now=0.0) == [
        ("a", False), ("b", False), ("c", False), ("d", False), ("", False)]


def test_a_crlf_split_across_reads_is_still_one_terminator() -> None:
    splitter = text_lines.LineSplitter()
    assert splitter.feed(b"INFO done\r", now=0.0) == [("INFO done", False)]
    assert splitter.feed(b"\nnext\n", now=0.1) == [("next", False)]


def test_ansi_colours_are_stripped_and_bad_utf8_replaced() -> None:
    splitter = text_lines.LineSplitter()
    lines = splitter.feed(b"\x1b[1;32mINFO\x1b[0m ok \xff\n", now=0.0)
    assert lines == [("INFO ok \ufffd", False)]


def test_escapes_nested_in_escapes_and_lone_controls_leave_no_escape_in_a_log_line() -> None:
    """One pass over ``ESC ESC[0m[2J`` leaves ``ESC[2J`` (issue 34): removed until none is left."""
    splitter = text_lines.LineSplitter()
    hostile = (b"\x1b\x1b[0m[2Ja\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\ \x1bcreset "
               b"\x1b]0;title\x07\x1bP1q\x1b\\\x07bel\x00nul\x1b\x1b\x1b[[31m\tend\x1b\n")
    [(line, partial)] = splitter.feed(hostile, now=0.0)
    assert line == "alink reset belnulm\tend" and not partial
    assert not any(ord(ch) < 0x20 and ch != "\t" or 0x7f <= ord(ch) <= 0x9f for ch in line)


def test_an_open_tqdm_bar_is_emitted_as_partial_once_it_has_been_idle() -> None:
    splitter = text_lines.LineSplitter(idle_s=0.3)
    bar = b"\rCapturing CUDA graphs (mixed prefill-decode, PIECEWISE):  12%|#2  | 6/51"
    assert splitter.feed(bar, now=10.0) == []
    assert splitter.flush_idle(now=10.2) == []
    assert splitter.flush_idle(now=10.31) == [(bar[1:].decode(), True)]
    # the next update and the closing newline produce the next state, no empty line
    assert splitter.feed(b"\r 100%|####| 51/51\n", now=11.0) == [(" 100%|####| 51/51", False)]


def test_an_idle_fragment_that_ends_inside_a_character_keeps_its_bytes_for_the_next_read() -> None:
    """Docker's client relays a container's output in pieces; one ended inside a bar's block."""
    splitter = text_lines.LineSplitter(idle_s=0.3)
    block = "\u2588".encode()  # three bytes
    assert splitter.feed(b"graphs: 100%|" + block * 5 + block[:2], now=10.0) == []
    assert splitter.flush_idle(now=10.31) == [("graphs: 100%|" + "\u2588" * 5, True)]
    assert splitter.feed(block[2:] + block * 4 + b"| 35/35\n", now=10.5) == [("\u2588" * 5 + "| 35/35", False)]
    assert text_lines.complete_utf8(block[:1]) == 0 and text_lines.complete_utf8(block) == 3
    assert text_lines.complete_utf8(b"ascii") == 5 and text_lines.complete_utf8(b"\xff") == 1  # invalid: emitted


def test_whatever_is_pending_at_the_end_is_flushed_as_partial() -> None:
    splitter = text_lines.LineSplitter()
    splitter.feed(b"no newline at the end", now=0.0)
    assert splitter.flush() == [("no newline at the end", True)]
    assert splitter.flush() == []


def test_a_runaway_line_is_cut_instead_of_growing_forever() -> None:
    splitter = text_lines.LineSplitter(max_line=10)
    assert splitter.feed(b"0123456789abc", now=0.0) == [("0123456789abc", True)]


def test_the_events_reader_only_returns_complete_lines_and_each_once(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"seq":0}\n{"seq":1}\n{"se')
    tail = event_log.EventTail(str(path), start_seq=1)
    assert tail.read_new() == [b'{"seq":1}']
    assert tail.position == 2
    with open(path, "ab") as handle:
        handle.write(b'q":2}\n')
    assert tail.read_new() == [b'{"seq":2}']
    assert tail.read_new() == [] and tail.position == 3


def test_a_reader_asked_for_lines_not_yet_written_waits_for_them(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"seq":0}\n')
    tail = event_log.EventTail(str(path), start_seq=3)
    assert tail.read_new() == [] and tail.position == 3
    path.write_bytes(b'{"seq":0}\n{"seq":1}\n{"seq":2}\n{"seq":3}\n')
    assert tail.read_new() == [b'{"seq":3}'] and tail.position == 4


def test_the_writer_numbers_lines_by_their_index_and_continues_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = event_log.EventLog(str(path))
    assert log.append("log", line="a")["seq"] == 0
    assert log.append("log", line="b")["seq"] == 1
    log.close()
    again = event_log.EventLog(str(path))
    assert again.append("exit", rc=0)["seq"] == 2
    again.close()
    assert [line["seq"] for line in h.parse_lines(path.read_text())] == [0, 1, 2]


def test_every_host_module_parses_as_python_3_8() -> None:
    """Hosts run old distros: the agent's syntax must not need a newer Python."""
    for source in sorted(h.COLLECTORS.glob("*.py")):
        ast.parse(source.read_text(), filename=str(source), feature_version=(3, 8))


def test_host_modules_never_import_reprofleet() -> None:
    for source in sorted(h.COLLECTORS.glob("*.py")):
        tree = ast.parse(source.read_text())
        names = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
        names += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        assert not [name for name in names if name.split(".")[0] == "reprofleet"], source.name
