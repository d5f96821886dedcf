"""Rewrite one section of bench/RESULTS.md, leaving the other benchmarks' sections alone."""

from __future__ import annotations

import re
from pathlib import Path

HEADER = "# Benchmark results\n\nEach section is rewritten by the benchmark named in its heading, with the command that\nproduced it. Numbers are from a 2-core VM unless the section says otherwise.\n"


def rewrite_section(path: Path, key: str, title: str, body: str) -> None:
    text = path.read_text() if path.exists() else HEADER
    block = f"<!-- {key} -->\n## {title}\n\n{body.rstrip()}\n<!-- /{key} -->\n"
    pattern = re.compile(rf"<!-- {re.escape(key)} -->.*?<!-- /{re.escape(key)} -->\n", re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block
    path.write_text(text)
