"""A bench script (bench/<name>.py) imported as a module, for the tests of its bookkeeping."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support import paths

BENCH = paths.REPO / "bench"


def load_bench(name: str) -> ModuleType:
    """bench/<name>.py as module ``name`` (registered, so its dataclasses and pickles resolve)."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
