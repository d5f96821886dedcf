"""Every short shell command the controller runs on a host, parsed by its pure parser, against
golden cases (tests/fixtures/host_commands/*.json: the command's arguments, what the host
printed, its exit status, the value the parser must return, and where that output comes from).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from reprofleet.errors import ReprofleetError
from reprofleet.remote import host_commands
from reprofleet.remote.transport import CommandResult
from tests.support.paths import FIXTURES

CASES = sorted((FIXTURES / "host_commands").glob("*.json"))


class Agent:
    """An agent whose session answers one golden case."""

    def __init__(self, case: dict[str, Any]) -> None:
        self.host = "ws01"
        self.case = case
        self.asked: list[str] = []
        self.session = self

    def run(self, command: str, timeout: float) -> CommandResult:
        self.asked.append(command)
        return CommandResult(command, self.case["exit_code"], self.case["stdout"], self.case["stderr"])


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def test_there_is_a_golden_case_for_every_command() -> None:
    facts = {json.loads(p.read_text())["fact"] for p in CASES}
    assert facts == {"boot_now", "home_folder", "boots_listed", "image_id", "image_digests", "prepare_cache",
                     "cache_manifest"}


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_a_commands_output_parses_to_its_golden_value(path: Path) -> None:
    case = json.loads(path.read_text())
    assert case["source"], "a golden case names where its output comes from"
    fact = getattr(host_commands, case["fact"])(*case["args"])
    agent = Agent(case)
    if "raises" in case:
        with pytest.raises(ReprofleetError) as caught:
            host_commands.run_command(agent, fact)  # type: ignore[arg-type]
        assert type(caught.value).__name__ == case["raises"] and "ws01" in str(caught.value)
    else:
        assert _plain(host_commands.run_command(agent, fact)) == case["parsed"]  # type: ignore[arg-type]
    assert agent.asked == [fact.command]


def test_every_path_in_a_command_is_shell_quoted() -> None:
    home = "/home/o'brien; touch owned"
    for fact in (host_commands.prepare_cache(home, f"{home}/seed.tar.gz"), host_commands.cache_manifest(home),
                 host_commands.image_id(f"img; {home}"), host_commands.image_digests(f"img; {home}")):
        assert "'\"'\"'" in fact.command and "; touch owned'" in fact.command


def test_a_host_is_named_in_a_parse_error() -> None:
    fact = host_commands.boot_now()
    with pytest.raises(ReprofleetError, match="ws01"):
        fact.parse("ws01", CommandResult(fact.command, 0, "only-one-word\n", ""))
