"""Search and bisection playbooks for the tests: the project's example (playbooks/search-clock.yml)
and ``write``, a playbook of a test's own ``search:``/``bisect:`` block under a common head.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.support.paths import REPO

EXAMPLE = REPO / "playbooks" / "search-clock.yml"
HEAD = "name: t\npoc: {script: poc.py}\nruntime: {kind: docker, image: \"vllm/vllm-openai:v{vllm}\"}\ndefaults: {vars: {vllm: \"0.25.1\"}}\n"


def write(tmp_path: Path, body: str) -> Path:
    (tmp_path / "poc.py").write_text("")
    path = tmp_path / "campaign.yml"
    path.write_text(HEAD + textwrap.dedent(body).lstrip("\n"))
    return path
