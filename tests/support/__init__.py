"""Shared fakes, harnesses and fixtures: the only test code another test module may import.

Fixtures used by several modules are registered once, through ``pytest_plugins`` in
tests/conftest.py.
"""
