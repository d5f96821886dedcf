"""The hostile-host and fuzz suites' counts, printed at the end of a run.

A suite that passes because it tried nothing proves nothing, so it says how much it tried:
``hostile host: N cases, R refused with our error, A accepted, 0 tracebacks`` (hostile_host.tried
counts them) and ``fuzz: N generated inputs, 0 tracebacks`` (test_fuzz_inputs counts its
examples in the same counter).
"""

from __future__ import annotations

import pytest

from hostile_host import COUNTS


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
