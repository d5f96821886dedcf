"""Records made up for the verdict tests: ``rec``/``many`` write attempt records (each with an
attempt id of its own), ``pool_of`` pools them under one judging, ``verdict`` picks a cell's
verdict from a judgement. Used by the verdict, claim and compare tests.
"""

from __future__ import annotations

from typing import Any

from reprofleet.model import Judging, Phase
from reprofleet.records.pooling import CampaignInfo, Pool

SEED = Judging(at_risk_phase=Phase.CUDA_GRAPH_CAPTURE)
_counter = iter(range(10**9))


def rec(cell: str, host: str, outcome: str, *, campaign: str = "c1", phase: str | None = "ready",
        image: str = "vllm/vllm-openai:v0.25.1", **extra: Any) -> dict[str, Any]:
    return {"schema": 1, "campaign": campaign, "attempt": f"a{next(_counter)}", "host": host, "cell": cell,
            "factors": {"cell": cell, "image": image}, "runtime": {"kind": "docker", "label": image},
            "outcome": outcome, "last_phase": phase, "started": "2026-11-30T00:00:00Z", **extra}


def many(n: int, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    return [rec(*args, **kwargs) for _ in range(n)]


def pool_of(records: list[dict[str, Any]], judging: Judging = SEED, reference: str | None = "default",
            cells: tuple[str, ...] = ()) -> Pool:
    campaigns = {c: CampaignInfo(c, judging, reference, cells) for c in {r["campaign"] for r in records}}
    return Pool(tuple(records), campaigns)


def verdict(judgement: Any, cell: str) -> Any:
    return next(v for v in judgement.verdicts if v.cell == cell)
