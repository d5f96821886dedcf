"""The hostile-host and fuzz suites' counts, printed at the end of a run.

A suite that passes because it tried nothing proves nothing, so it says how much it tried:
``hostile host: N cases, R refused with our error, A accepted, 0 tracebacks`` (hostile_host.tried
counts them) and ``fuzz: N generated inputs, 0 tracebacks`` (test_fuzz_inputs counts its
examples in the same counter).
"""

from __future__ import annotations

import pytest

from tests.support.hostile_host import COUNTS


def pytest_configure(config: pytest.Config) -> None:
    COUNTS.clear()


def pytest_terminal_summary(terminalreporter: object, exitstatus: int, config: pytest.Config) -> None:
    write = getattr(terminalreporter, "write_line")
    if COUNTS["cases"]:
        write(f"hostile host: {COUNTS['cases']} cases, {COUNTS['refused']} refused with our error, "
              f"{COUNTS['accepted']} accepted, {COUNTS['tracebacks']} tracebacks"
              + (f"; tracemalloc peak while a host sent 1 GB: {COUNTS['peak_bytes'] / 2**20:.1f} MiB"
                 if COUNTS["peak_bytes"] else ""))
    if COUNTS["fuzz"]:
        write(f"fuzz: {COUNTS['fuzz']} generated inputs, {COUNTS['fuzz_tracebacks']} tracebacks")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """On an xdist worker: hand its counts to the controller, which prints the sum."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["hostile_counts"] = dict(COUNTS)


def pytest_testnodedown(node: object, error: object) -> None:
    """On the controller: add a finished worker's counts (the peak is the largest, not a sum)."""
    counts = (getattr(node, "workeroutput", None) or {}).get("hostile_counts") or {}
    for key, value in counts.items():
        COUNTS[key] = max(COUNTS[key], value) if key == "peak_bytes" else COUNTS[key] + value
