"""make test cannot go green by skipping the fleet tests."""

from __future__ import annotations

import pytest

from tests.support.paths import SUPPORT

pytest_plugins = ["pytester"]

SUITE = '''
import pytest

@pytest.mark.fleet
def test_needs_the_fleet():
    pytest.skip("the simulated fleet needs root")

def test_plain():
    pass
'''


def _run(pytester: pytest.Pytester) -> pytest.RunResult:
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini("[pytest]\nmarkers =\n    fleet: fleet\n")
    return pytester.runpytest_subprocess("-p", "fleet_guard", "-q")


def test_a_skipped_fleet_test_fails_the_run_and_is_counted(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPROFLEET_ALLOW_FLEET_SKIP", raising=False)
    monkeypatch.setenv("PYTHONPATH", str(SUPPORT))
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*fleet tests: 0 ran (0 passed, 0 failed), 1 skipped*", "*FAILED: 1 fleet tests were skipped*"])


def test_the_explicit_opt_out_lets_it_pass(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPROFLEET_ALLOW_FLEET_SKIP", "1")
    monkeypatch.setenv("PYTHONPATH", str(SUPPORT))
    assert _run(pytester).ret == pytest.ExitCode.OK
