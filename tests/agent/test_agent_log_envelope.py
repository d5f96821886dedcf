"""What one PoC line costs on the wire and on the controller's disk (issue 34, item 2): a PoC
printing ``yes x`` made a stream 36 times its output, every byte of it the envelope of
one-character lines. The envelope carries what a line needs (its time, kind, seq and, with a
key, its MAC) and nothing that never varies."""

from __future__ import annotations

from pathlib import Path

from tests.support import agent_harness as h


def test_a_log_line_carries_its_time_kind_seq_and_text_and_nothing_constant(state_dir: Path) -> None:
    status, lines, err = h.run_agent(state_dir, "run", "--id", "env1", "--timeout", "30", "--",
                                     "sh", "-c", "printf 'x\\nx\\n'")
    assert status == 0, err
    logs = [line for line in lines if line["k"] == "log"]
    assert [line["line"] for line in logs] == ["x", "x"]
    assert all(set(line) == {"t", "k", "seq", "line"} for line in logs), logs
