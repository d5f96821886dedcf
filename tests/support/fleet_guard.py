"""A suite that skipped its fleet tests has not tested the product: fail it, loudly.

The fleet tests need root (network namespaces, cgroups, iptables). Run without it, every one
of them skips and the rest of the suite still passes, so ``make test`` could be green while
testing none of the end-to-end behaviour. This plugin counts the fleet tests, prints how many
ran, and turns the run into a failure when any was skipped, unless the person running it says
so explicitly with ``REPROFLEET_ALLOW_FLEET_SKIP=1``.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

OPT_OUT = "REPROFLEET_ALLOW_FLEET_SKIP"
_COUNTS: Counter[str] = Counter()  # one pytest session per process


def pytest_configure(config: pytest.Config) -> None:
    _COUNTS.clear()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "fleet" not in report.keywords:
        return
    counts = _COUNTS
    if report.skipped:
        counts["skipped"] += 1
    elif report.when == "call":
        counts["passed" if report.passed else "failed"] += 1
    elif report.failed:
        counts["failed"] += 1  # a fleet that could not come up (setup) or go down (teardown)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    counts = _COUNTS
    if counts["skipped"] and not os.environ.get(OPT_OUT) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: object, exitstatus: int, config: pytest.Config) -> None:
    counts = _COUNTS
    ran = counts["passed"] + counts["failed"]
    if not ran and not counts["skipped"]:
        getattr(terminalreporter, "write_line")("fleet tests: none selected in this run")
        return
    line = f"fleet tests: {ran} ran ({counts['passed']} passed, {counts['failed']} failed), {counts['skipped']} skipped"
    write = getattr(terminalreporter, "write_line")
    write(line)
    if counts["skipped"] and not os.environ.get(OPT_OUT):
        write(f"FAILED: {counts['skipped']} fleet tests were skipped; run as root, or set {OPT_OUT}=1 to accept that")
