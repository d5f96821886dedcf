"""The exit status of a campaign says whether its numbers can be used: 0 only when every host
ran its plan and every cell was judged; a quarantined host or an unjudged cell is named."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Mapping

from rich.console import Console

from reprofleet.cli.exits import ExitStatus
from reprofleet.cli.campaign_tasks import campaign_status


@dataclass
class Result:
    failure: str | None = None
    interrupted: bool = False
    quarantined: Mapping[str, str] = field(default_factory=dict)
    unjudged: tuple[str, ...] = ()
    given_back: Mapping[str, str] = field(default_factory=dict)


def status(result: Result) -> tuple[ExitStatus, str]:
    out = io.StringIO()
    code = campaign_status(result, Console(file=out, width=200, color_system=None))
    return code, out.getvalue()


def test_a_campaign_where_everything_ran_and_was_judged_exits_0() -> None:
    assert status(Result()) == (ExitStatus.OK, "")


def test_a_quarantined_host_is_named_and_the_status_is_3() -> None:
    code, text = status(Result(quarantined={"ws02": "cannot run here: nvidia-smi not found on PATH"}))
    assert code is ExitStatus.SOME_HOSTS_FAILED and int(code) == 3
    assert text.strip() == "ws02: quarantined: cannot run here: nvidia-smi not found on PATH"


def test_a_cell_no_host_could_judge_is_named_and_the_status_is_4() -> None:
    code, text = status(Result(unjudged=("lgc-2800",)))
    assert code is ExitStatus.NOT_JUDGED and int(code) == 4 and "cell lgc-2800: no attempt could be judged" in text


def test_the_controllers_own_failure_and_an_interruption_come_first() -> None:
    assert status(Result(failure="disk full", quarantined={"a": "x"}))[0] is ExitStatus.ERROR
    assert status(Result(interrupted=True, unjudged=("c",)))[0] is ExitStatus.INTERRUPTED


def test_a_campaign_the_controller_stopped_says_exactly_what_each_host_got_back() -> None:
    code, text = status(Result(failure="the controller's disk holding /r has 100 MiB free",
                               given_back={"ws01": "GPU settings restored",
                                           "ws02": "GPU settings NOT restored: it does not answer"}))
    assert code is ExitStatus.ERROR
    assert "ws01: GPU settings restored" in text and "ws02: GPU settings NOT restored: it does not answer" in text
