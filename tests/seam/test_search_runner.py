"""A search campaign at the runner's seam: the ladder picks each next cell, in virtual time.

The host is a scripted fake whose outcome depends on the graphics-clock ceiling the cell
applied (a wedge at 2800 MHz and above, clean below), the model a toy rule behind the
ladder seam (tests/support/search_fakes.py). What is pinned: the cells run are the ladder's
choices, attempt indexes count up per (host, cell), each choice is a ``search_probe``
event and the end one ``search_done``, the probes the ladder sees come through the
outcome roles, and a campaign stopped mid-search and resumed ends as an uninterrupted one.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from reprofleet.clock import VirtualClock
from reprofleet.playbook.ladder import ladder_plan
from reprofleet.records.store import read_log_lines, read_records
from reprofleet.runner.search import LadderSchedule
from reprofleet.stats.search_contract import Probe, ProbeOutcome
from tests.support.search_campaign import LEVELS, ClockHost, run_search, search_book
from tests.support.search_fakes import StepLadder


def test_a_search_runs_the_cells_its_ladder_chooses_with_indexes_counted_per_cell(tmp_path: Path) -> None:
    book, clock = search_book(tmp_path / "book"), VirtualClock()
    fake, ladder = ClockHost(clock), StepLadder(len(LEVELS))
    result = run_search(book, tmp_path, fake, ladder, clock)
    records = list(read_records(result.directory.attempts))
    assert [(r["cell"], r["attempt_index"], r["outcome"]) for r in records] == [
        ("search-graphics_clocks-2200", 0, "clean"), ("search-graphics_clocks-2200", 1, "clean"),
        ("search-graphics_clocks-2400", 0, "clean"), ("search-graphics_clocks-2400", 1, "clean"),
        ("search-graphics_clocks-2600", 0, "clean"), ("search-graphics_clocks-2600", 1, "clean"),
        ("search-graphics_clocks-2800", 0, "wedge")]
    assert fake.ceilings == [2200, 2200, 2400, 2400, 2600, 2600, 2800]  # the cell's -lgc reached the card
    last_seen = ladder.asked[-1][1]
    assert last_seen[-1] == Probe(3, "h1", ProbeOutcome.REPRODUCED, power_cycled=True)
    assert [p.outcome for p in last_seen[:-1]] == [ProbeOutcome.CLEAN] * 6
    events = read_log_lines(result.directory.events)
    probes = [e for e in events if e["event"] == "search_probe"]
    assert [(e["level"], e["cell"], e["index"]) for e in probes][:3] == [
        (0, "search-graphics_clocks-2200", 0), (0, "search-graphics_clocks-2200", 1), (1, "search-graphics_clocks-2400", 0)]
    assert all(e["host"] == "h1" and e["why"] for e in probes)
    done = [e for e in events if e["event"] == "search_done"]
    assert len(done) == 1 and done[0]["result"][0]["boundary"] == 2 and done[0]["kind"] == "search"
    manifest = (result.directory.root / "campaign.json").read_text()
    assert '"search"' in manifest and "search-graphics_clocks-3000" in manifest
    assert result.unjudged == ()  # 3000 MHz never ran: the ladder had its answer (exit 0, not "no verdict")


def test_only_a_level_that_ran_and_was_all_infra_is_unjudged_while_a_matrix_cell_without_records_is(
        tmp_path: Path) -> None:
    from reprofleet.campaign.run import unjudged_cells

    book = search_book(tmp_path / "book")
    records = [{"cell": "search-graphics_clocks-2200", "outcome": "clean"},
               {"cell": "search-graphics_clocks-2400", "outcome": "infra"}]
    assert unjudged_cells(book, records) == ("search-graphics_clocks-2400",)
    matrix = replace(book, search=None)
    assert unjudged_cells(matrix, records) == tuple(c.name for c in book.cells if c.name != "search-graphics_clocks-2200")


def test_a_search_stopped_mid_way_and_resumed_ends_as_an_uninterrupted_one(tmp_path: Path) -> None:
    book = search_book(tmp_path / "book")
    whole_clock = VirtualClock()
    whole = run_search(book, tmp_path / "whole", ClockHost(whole_clock), StepLadder(len(LEVELS)), whole_clock)
    clock, stop, seen = VirtualClock(), threading.Event(), []

    def stop_after_three(host: str, **fields: Any) -> None:
        if "outcome" in fields:
            seen.append(fields["outcome"])
            if len(seen) == 3:
                stop.set()

    first = run_search(book, tmp_path / "split", ClockHost(clock), StepLadder(len(LEVELS)), clock, stop, stop_after_three)
    assert first.interrupted and len(list(read_records(first.directory.attempts))) == 3
    assert not [e for e in read_log_lines(first.directory.events) if e["event"] == "search_done"]
    fresh = StepLadder(len(LEVELS))
    resumed = run_search(book, tmp_path / "split", ClockHost(clock), fresh, clock)
    assert len(fresh.asked[0][1]) == 3  # the new controller's model starts from the three records on disk

    def shape(result: Any) -> list[tuple[str, int, str]]:
        return [(r["cell"], r["attempt_index"], r["outcome"]) for r in read_records(result.directory.attempts)]

    assert shape(resumed) == shape(whole)
    done = [e["result"] for e in read_log_lines(resumed.directory.events) if e["event"] == "search_done"]
    assert done == [e["result"] for e in read_log_lines(whole.directory.events) if e["event"] == "search_done"]
    again = run_search(book, tmp_path / "split", ClockHost(clock), StepLadder(len(LEVELS)), clock)
    assert shape(again) == shape(whole)  # a finished search resumed runs nothing and tells its result once
    assert [e["result"] for e in read_log_lines(again.directory.events) if e["event"] == "search_done"] == done


def test_the_schedule_stops_a_host_at_the_attempt_budget_whatever_the_model_says(tmp_path: Path) -> None:
    book = search_book(tmp_path / "book")
    assert book.search is not None and book.search.budget_attempts == 40

    class Forever(StepLadder):
        def next(self, host: str, probes: Any, running: Any) -> int | None:
            return 0

    clock = VirtualClock()
    result = run_search(book, tmp_path, ClockHost(clock), Forever(len(LEVELS)), clock)
    assert len(list(read_records(result.directory.attempts))) == 40


def test_an_observe_only_host_runs_no_clock_level_and_leaves_the_ladder(tmp_path: Path) -> None:
    from reprofleet.model import GpuAccess

    book, clock = search_book(tmp_path / "book"), VirtualClock()
    fake = ClockHost(clock)
    fake.host = replace(fake.host, gpu_access=GpuAccess.OBSERVE)
    result = run_search(book, tmp_path, fake, StepLadder(len(LEVELS)), clock)
    assert not result.directory.attempts.exists() or not list(read_records(result.directory.attempts))
    assert fake.ceilings == [] and fake.policy_calls.count("apply") == 0


def test_a_model_that_fails_quarantines_the_host_with_its_words_and_the_campaign_ends(tmp_path: Path) -> None:
    class Broken(StepLadder):
        def next(self, host: str, probes: Any, running: Any) -> int | None:
            raise ImportError("No module named 'reprofleet.stats.boundary'")

        def results(self, probes: Any) -> Any:
            raise ImportError("No module named 'reprofleet.stats.boundary'")

    book, clock = search_book(tmp_path / "book"), VirtualClock()
    result = run_search(book, tmp_path, ClockHost(clock), Broken(len(LEVELS)), clock)
    assert result.quarantined == {"h1": "the search model failed: ImportError: No module named "
                                        "'reprofleet.stats.boundary'"}
    (done,) = [e for e in read_log_lines(result.directory.events) if e["event"] == "search_done"]
    assert done["result"] is None and "ImportError" in done["error"]


def test_riskier_lower_puts_the_highest_value_first_on_the_ladder(tmp_path: Path) -> None:
    book = search_book(tmp_path / "book", riskier="lower")
    assert book.search is not None and book.search.values == tuple(reversed(LEVELS))
    assert book.reference == "search-graphics_clocks-3000"


def _record(host: str, cell: str, outcome: str, index: int = 0, **extra: Any) -> dict[str, Any]:
    return {"host": host, "cell": cell, "outcome": outcome, "attempt_index": index,
            "last_phase": "cuda_graph_capture" if outcome == "clean" else extra.pop("last_phase", "model_load"),
            "phases": ["model_load", "torch_compile", "kv_cache", "cuda_graph_capture"] if outcome == "clean" else None,
            "reason": extra.pop("reason", ""), **extra}


def test_records_become_probes_through_the_outcome_roles_and_the_phase_gate(tmp_path: Path) -> None:
    book = search_book(tmp_path / "book")
    assert book.search is not None
    plan = ladder_plan(book.search, ["h1", "h2"])
    ladder = StepLadder(len(LEVELS))
    earlier = [_record("h1", "search-graphics_clocks-2200", "clean"),
               _record("h1", "search-graphics_clocks-2200", "error", 1),  # before the phase at risk: unusable
               _record("h2", "search-graphics_clocks-2400", "infra", reason="not run: quarantined"),  # runs again: no probe
               _record("h2", "search-graphics_clocks-2400", "wedge"),
               _record("h2", "not-on-the-ladder", "wedge")]
    schedule = LadderSchedule(book, plan, ladder, ["h1", "h2"], earlier)
    assert schedule.probes == [Probe(0, "h1", ProbeOutcome.CLEAN), Probe(0, "h1", ProbeOutcome.UNUSABLE),
                               Probe(1, "h2", ProbeOutcome.REPRODUCED, power_cycled=True)]
    cell, index = schedule.next_slot("h1") or (None, None)
    assert cell is not None and cell.name == "search-graphics_clocks-2200" and index == 2  # after its two records


def test_two_hosts_see_each_others_running_levels_and_a_waiting_host_leaves_when_nobody_runs(tmp_path: Path) -> None:
    book = search_book(tmp_path / "book")
    assert book.search is not None
    events: list[tuple[str, str, dict[str, Any]]] = []
    ladder = StepLadder(1, clean_needed=2, hosts=("h1", "h2"))
    schedule = LadderSchedule(book, ladder_plan(book.search, ["h1", "h2"]), ladder, ["h1", "h2"],
                              event=lambda host, what, **f: events.append((host, what.value, f)))
    first, second = schedule.next_slot("h1"), schedule.next_slot("h2")
    assert first is not None and second is not None and first[0].name == second[0].name
    assert ladder.asked[-1][2] == {"h1": 0}  # h2 was asked with h1's running level
    from reprofleet.model import Outcome, Record
    clean = Record(campaign="c", attempt="a1", controller="x", host="h1", cell=first[0].name, factors={}, policy=None,
                   runtime={}, cache=None, attempt_index=0, attempt_in_boot=0, cold_boot=False, boot_id=None,
                   started="", ended="", outcome=Outcome.CLEAN, last_phase="cuda_graph_capture",
                   phases=("model_load", "torch_compile", "kv_cache", "cuda_graph_capture"))
    schedule.observe("h1", clean)
    left: list[Any] = []
    waiter = threading.Thread(target=lambda: left.append(schedule.next_slot("h1")))
    waiter.start()  # h1 has nothing to run while h2 still runs: it waits for h2's record
    schedule.observe("h2", replace(clean, host="h2", attempt="a2"))
    assert schedule.next_slot("h2") is None
    waiter.join(10)
    assert left == [None] and not waiter.is_alive()
    assert [e[1] for e in events].count("search_done") == 1


def _refused_and_interrupted_records(cell: str) -> tuple[Any, Any]:
    from reprofleet.model import Outcome, Record
    from reprofleet.model.reasons import ReasonCode

    def infra(reason: str) -> Record:
        return Record(campaign="c", attempt=reason[:8], controller="pytest", host="h1", cell=cell, factors={},
                      policy=None, runtime={}, cache=None, attempt_index=0, attempt_in_boot=0, cold_boot=False,
                      boot_id=None, started="2026-12-06T00:00:00Z", ended="2026-12-06T00:00:00Z",
                      outcome=Outcome.INFRA, reason=reason)

    return (infra(ReasonCode.NOT_RUN.words("the agent refused to start it (attempt x is still running)")),
            infra(ReasonCode.INTERRUPTED.words("the campaign was stopped")))


def test_a_refused_start_keeps_its_place_in_the_budget_while_an_interrupted_slot_gives_it_back(
        tmp_path: Path) -> None:
    from reprofleet.model import Host

    book = search_book(tmp_path / "book")
    assert book.ladder is not None
    hosts = (Host(name="h1", address="127.0.0.1"),)
    schedule = LadderSchedule(book, ladder_plan(book.ladder, hosts, book.seed), StepLadder(len(LEVELS)), ["h1"], [],
                              lambda *args, **fields: None, threading.Event())
    cell, _ = schedule.next_slot("h1")  # type: ignore[misc]
    refused, interrupted = _refused_and_interrupted_records(cell.name)
    schedule.observe("h1", refused, refused=True)
    assert schedule.spent == 1  # nothing ran, but a host that is refused for ever must reach the budget
    schedule.next_slot("h1")
    schedule.observe("h1", interrupted)
    assert schedule.spent == 1  # the interrupted slot runs again: its place is given back
