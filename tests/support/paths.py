"""Where the repository and the test data are, for every test and helper wherever it sits."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
FIXTURES = TESTS / "fixtures"
SUPPORT = TESTS / "support"
