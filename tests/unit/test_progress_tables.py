"""Terminal tables: a missing value is a dash, a host's error has its own column, hosts in natural order."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from reprofleet.errors import ReprofleetError
from reprofleet.cli.tables import facts_table
from reprofleet.cli.tables import policy_table
from reprofleet.cli.progress import LiveProgress


def _text(table: Table) -> str:
    console = Console(width=220, record=True)
    console.print(table)
    return console.export_text()


def test_missing_facts_print_as_dashes_and_an_error_gets_its_own_column() -> None:
    text = _text(facts_table({"ws10": ReprofleetError("ssh: connection refused"),
                              "ws2": {"gpus": [{"name": "RTX PRO 6000", "power_limit_w": {}}], "dmi": {}}}))
    assert "None" not in text
    header = next(line for line in text.splitlines() if "GPU" in line and "host" in line)
    assert header.rstrip(" │┃").endswith("error")
    ws10 = next(line for line in text.splitlines() if "ws10" in line)
    cells = [c.strip() for c in ws10.split("│")[1:-1]]
    assert cells[1:-1] == ["—"] * 6 and cells[-1] == "ssh: connection refused"
    assert text.index("ws2") < text.index("ws10")


def test_a_policy_read_back_with_gaps_shows_dashes_not_none_watts() -> None:
    text = _text(policy_table({"ws1": {"graphics_clocks": [180, 3090], "power_limit_w": None}}))
    assert "None" not in text and "180,3090" in text
    row = [c.strip() for c in next(l for l in text.splitlines() if "ws1" in l).split("│")[1:-1]]
    assert row[3] == "—"  # power limit


def test_the_live_table_orders_hosts_naturally_and_dashes_what_is_not_known_yet() -> None:
    progress = LiveProgress(["ws10", "ws2"], {"ws10": 2, "ws2": 2}, Console(width=120, record=True))
    text = _text(progress.render())
    assert text.index("ws2") < text.index("ws10")
    assert "—" in next(line for line in text.splitlines() if "ws2" in line)


def test_a_host_whose_cell_stopped_early_ends_at_n_of_n_and_says_how_many_slots_were_not_needed() -> None:
    progress = LiveProgress(["ws1"], {"ws1": 6}, Console(width=120, record=True))
    for _ in range(2):
        progress("ws1", outcome="wedge", counts={"wedge": 1})
    for _ in range(4):
        progress("ws1", stopped_early=1)
    row = next(line for line in _text(progress.render()).splitlines() if "ws1" in line)
    assert "2/2 (4 not needed)" in row


def test_outside_a_terminal_each_change_is_one_plain_line_and_a_summary_comes_every_minute() -> None:
    import io
    import time

    out = io.StringIO()
    now = [100.0]
    progress = LiveProgress(["ws1", "ws2"], {"ws1": 2, "ws2": 2}, Console(file=out, width=120),
                            summary_every_s=0.05, clock=lambda: now[0])
    assert progress._plain  # a StringIO is no terminal
    with progress:
        progress("ws1", status="running", cell="default")
        now[0] += 61
        progress("ws1", phase="cuda_graph_capture")
        progress("ws1", phase="cuda_graph_capture")  # no change: no line
        progress("ws1", outcome="wedge", counts={"wedge": 1})
        deadline = time.monotonic() + 5
        while "summary:" not in out.getvalue() and time.monotonic() < deadline:  # the ticker's own line
            time.sleep(0.01)
    lines = out.getvalue().splitlines()
    events = [line for line in lines if "summary:" not in line]
    assert events[0] == "[0 s] ws1: status running (cell default, attempt 0/2)"
    assert events[1] == "[61 s] ws1: phase cuda_graph_capture (cell default, attempt 0/2)"
    assert len(events) == 3 and events[2] == "[61 s] ws1: wedge (cell default, attempt 1/2)"
    assert not [line for line in lines if "\x1b" in line or "┃" in line]  # no table, no colour codes
    assert lines[-1] == "[61 s] summary: 1/4 attempts done; outcomes: wedge 1; hosts: 1 running, 1 waiting"
    assert sum("summary:" in line for line in lines) >= 2  # the minute's line, and the last one at the end


def test_a_search_host_shows_what_it_has_done_and_the_summary_the_budget() -> None:
    progress = LiveProgress(["ws1"], {"ws1": None}, Console(width=120, record=True), budget=40)
    progress("ws1", outcome="clean", counts={"clean": 1})
    row = next(line for line in _text(progress.render()).splitlines() if "ws1" in line)
    assert "1 (chosen at run time)" in row
    assert "summary: 1 of a budget of 40 attempts done" in progress.summary_line()
