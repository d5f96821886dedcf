"""A search campaign at the runner's seam: its playbook (one cell per graphics-clock ceiling
of ``LEVELS``), a fake host that wedges from a ceiling up (``ClockHost``), and ``run_search``,
the whole campaign in virtual time with the ladder given. Used by the search runner and
search report tests.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.clock import VirtualClock
from reprofleet.model import Playbook, Timeouts
from reprofleet.playbook import load_playbook
from reprofleet.runner.recovery import recovery_factory
from tests.support.seam_host import POC_BYTES, FakeHost, seam_settings

LEVELS = (2200, 2400, 2600, 2800, 3000)


def search_book(root: Path, riskier: str = "higher") -> Playbook:
    root.mkdir(parents=True, exist_ok=True)
    (root / "poc.py").write_bytes(POC_BYTES)
    (root / "book.yml").write_text(f"""
name: unit-search
poc: {{script: poc.py}}
runtime: {{kind: docker, image: "vllm/vllm-openai:v0.25.1"}}
at_risk_phase: cuda_graph_capture
search:
  factor: graphics_clocks
  levels: [{", ".join(map(str, LEVELS))}]
  riskier: {riskier}
  target: {{epsilon: 0.1, delta: 0.1}}
  budget: {{attempts: 40}}
""")
    book = load_playbook(root / "book.yml")
    return replace(book, timeouts=Timeouts(attempt=30, boot=15))


class ClockHost(FakeHost):
    """Wedges when the applied clock ceiling is at or above ``wedge_from`` MHz."""

    def __init__(self, clock: VirtualClock, name: str = "h1", wedge_from: int = 2800) -> None:
        super().__init__(clock, name)
        self.wedge_from = wedge_from
        self.ceilings: list[int] = []

    def next_outcome(self) -> str:
        with self._lock:
            self.attempts_run += 1
            ceiling = int((self.policy.get("graphics_clocks") or [0, 0])[1])
            self.ceilings.append(ceiling)
            return "wedge" if ceiling >= self.wedge_from else "clean"


def run_search(book: Playbook, tmp_path: Path, fake: ClockHost, ladder: Any, clock: VirtualClock,
               stop: threading.Event | None = None, progress: Any = lambda host, **fields: None) -> Any:
    plan = make_plan(book, [fake.host], "search-1")
    return run_campaign(plan, seam_settings(tmp_path), tmp_path / "reports", recovery_factory=recovery_factory,
                        clock=clock, port_for=lambda ctx, h: fake.port(ctx), network_ok=lambda: True,
                        ladder_for=lambda lp: ladder, stop=stop, progress=progress)
