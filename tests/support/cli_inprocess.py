"""The front door run inside the test's process: a task's exit status, stdout and stderr, as a
shell would see them (for tests that read ``--json`` output without a subprocess's start-up)."""

from __future__ import annotations

import pytest
from invoke import Program

from reprofleet.cli.tasks import ns

__all__ = ["run_task"]


def run_task(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = 0
    try:
        Program(namespace=ns, name="reprofleet", binary="reprofleet").run(["reprofleet", *argv])
    except SystemExit as stopped:
        code = int(stopped.code or 0)
    out, err = capsys.readouterr()
    return code, out, err
