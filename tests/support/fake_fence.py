"""A fake fence agent on PATH (tests/fixtures/fence/fake_agent.py), for the decisions of the fence driver."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import FIXTURES

AGENT = "fence_fake"


class FakeFence:
    """The fake agent's folder: its power state, its behaviour, and what each run was given."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def behave(self, **behaviour: Any) -> None:
        (self.folder / "behaviour.json").write_text(json.dumps(behaviour))

    @property
    def state(self) -> str:
        return (self.folder / "state").read_text().strip()

    @state.setter
    def state(self, value: str) -> None:
        (self.folder / "state").write_text(value)

    def calls(self) -> list[dict[str, Any]]:
        path = self.folder / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def actions(self) -> list[str]:
        return [call["action"] for call in self.calls()]

    @property
    def nmis(self) -> int:
        path = self.folder / "nmi"
        return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.fixture
def fake_fence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeFence:
    """A ``fence_fake`` program first on PATH, in a folder of its own (its metadata cached per path)."""
    folder = tmp_path / "fence-bin"
    folder.mkdir()
    program = folder / AGENT
    program.write_text(f"#!{sys.executable}\n" + (FIXTURES / "fence" / "fake_agent.py").read_text())
    program.chmod(0o700)
    fake = FakeFence(folder)
    fake.behave()
    fake.state = "on"
    monkeypatch.setenv("PATH", f"{folder}:{os.environ.get('PATH', '')}")
    return fake
