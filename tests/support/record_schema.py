"""One line of attempts.jsonl against its published schema (docs/schema/records/attempt.schema.json).

Every test that writes a campaign folder under its ``tmp_path`` has each attempts.jsonl line
checked against the schema when it ends (tests/conftest.py), so a field the controller starts
writing, or a type it changes, fails the suite until the schema and docs/schema/generate.py say so.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

from jsonschema import Draft202012Validator

from tests.support.paths import REPO

SCHEMA = REPO / "docs" / "schema" / "records" / "attempt.schema.json"
MAX_FILES = 200  # a test that writes more campaign folders than this is checked on its first 200


@lru_cache(maxsize=1)
def validator() -> Draft202012Validator:
    return Draft202012Validator(json.loads(SCHEMA.read_text()))


def problems(line: Any) -> list[str]:
    """The schema's objections to one parsed line, as ``path: message`` (none: it is valid): for a
    record the record branch's own objections, for an amendment the amendment branch's."""
    branch = 1 if isinstance(line, dict) and "amends" in line else 0
    found = []
    for error in validator().iter_errors(line):
        inner = [e for e in error.context or () if e.schema_path and e.schema_path[0] == branch] or [error]
        found += [f"{'/'.join(map(str, e.absolute_path)) or '(line)'}: {e.message}" for e in inner]
    return found


def invalid_lines(root: Path) -> Iterator[str]:
    """``file:line: objection`` for each attempts.jsonl line under ``root`` the schema refuses.
    Lines that are not JSON (a torn last line a test wrote on purpose) are the reader's business."""
    for number_of_files, path in enumerate(sorted(root.rglob("attempts.jsonl"))):
        if number_of_files >= MAX_FILES or not path.is_file() or path.is_symlink():
            return
        for number, text in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            try:
                line = json.loads(text)
            except ValueError:
                continue
            if not isinstance(line, dict) or not ({"campaign", "controller"} <= set(line) or "amends" in line):
                continue  # a line a test wrote by hand (a reader's test, a planted hostile file): not the controller's
            for problem in problems(line):
                yield f"{path}:{number}: {problem}"
