"""FlashInfer's managed autotune store, as the fake vLLM (0.33 and later) finds and fills it.

vLLM 0.33 (``vllm/model_executor/warmup/kernel_warmup.py:478-493``, FlashInfer 0.7.2.post1 as its
wheel pins) tunes through ``flashinfer.autotune_v2`` on one node: the store's root is
``VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR`` when set (vLLM logs "Using FlashInfer managed autotune
cache (root=...)"), else FlashInfer's own default, ``FLASHINFER_AUTOTUNE_CACHE_DIR`` or
``FLASHINFER_CACHE_DIR/autotune`` (the workspace base, else the home folder, + ``.cache/flashinfer``;
vLLM logs "root=flashinfer default"). FlashInfer's layout (``flashinfer/autotune_cache.py``):
``<root>/v2/<environment hash>/manifest.json`` and ``entries/<sha256(key)[:24]>.json``, each entry
``{"key", "runner", "tactic"}``; attaching logs the store
(``ManagedAutotuneCache(env_dir=..., hits=0, misses=0)``, autotune_cache.py:320). A tuned op is
published; an op whose entry is found is served from it without profiling, logged once as
"Config cache hit for <op> (runner=..., source=managed cache)" (``flashinfer/autotuner/autotuner.py:1919``)
where a miss shows its "[AutoTuner]: Tuning <op>" progress bar.

So whether the second attempt tunes again depends on whether this root lies in the cache the
campaign keeps: the question the ``persistent`` cache mode answers.

Host-side module: standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import FrozenSet, Mapping, Tuple

SCHEMA = "v2"
FLASHINFER_VERSION = "0.7.2.post1"  # what vLLM 0.33.0's wheel requires
# The ops the fake engine tunes (the seed's NVFP4 MoE model), with the runner class each is tuned by
# (flashinfer/gemm/gemm_base.py: CutlassFp4GemmRunner; flashinfer/fused_moe/core.py: MoERunner).
OPS: Tuple[Tuple[str, str], ...] = (("fp4_gemm", "CutlassFp4GemmRunner"),
                                    ("trtllm::fused_moe::gemm1", "MoERunner"),
                                    ("trtllm::fused_moe::gemm2", "MoERunner"))


@dataclass(frozen=True)
class Store:
    """Where the store is for this process, as vLLM names it, and which ops it already holds."""

    root_words: str  # what vLLM prints after "root=": the override, or "flashinfer default"
    env_dir: Path
    hits: FrozenSet[str]


def _canonical(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def file_key(op: str, runner: str) -> str:
    """FlashInfer's lookup key: ``str((custom_op, runner_class_name, profile, extras))``."""
    return str((op, runner, ((8192,),), ()))


def entry_path(env_dir: Path, op: str, runner: str) -> Path:
    return env_dir / "entries" / (hashlib.sha256(file_key(op, runner).encode()).hexdigest()[:24] + ".json")


def manifest(gpu: str) -> dict:
    return {"flashinfer": FLASHINFER_VERSION, "gpu": gpu, "cuda": "12.9", "cache_schema": SCHEMA}


def find(env: Mapping[str, str], home: str, gpu: str) -> Store:
    """The store this process attaches, and the ops whose entries it finds (a malformed or
    foreign entry is a miss, as in FlashInfer)."""
    override = env.get("VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR")
    if override:
        root, words = Path(override).expanduser(), override
    elif env.get("FLASHINFER_AUTOTUNE_CACHE_DIR"):
        root, words = Path(env["FLASHINFER_AUTOTUNE_CACHE_DIR"]), "flashinfer default"
    else:
        base = env.get("FLASHINFER_WORKSPACE_BASE") or home
        root, words = Path(base) / ".cache" / "flashinfer" / "autotune", "flashinfer default"
    env_dir = root / SCHEMA / hashlib.sha256(_canonical(manifest(gpu)).encode()).hexdigest()[:16]
    hits = set()
    for op, runner in OPS:
        try:
            entry = json.loads(entry_path(env_dir, op, runner).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(entry, dict) and entry.get("key") == file_key(op, runner) and entry.get("runner") == runner:
            hits.add(op)
    return Store(words, env_dir, frozenset(hits))


def publish(store: Store, gpu: str) -> None:
    """Write every op's entry that was missing (after its tuning), atomically, and the manifest."""
    entries = store.env_dir / "entries"
    entries.mkdir(parents=True, exist_ok=True)
    (store.env_dir / "manifest.json").write_text(json.dumps(manifest(gpu), indent=2, sort_keys=True))
    for op, runner in OPS:
        if op in store.hits:
            continue
        path = entry_path(store.env_dir, op, runner)
        tmp = path.with_name(f".autotune_{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"key": file_key(op, runner), "runner": runner, "tactic": [0, 7]}, indent=2))
        os.replace(tmp, path)
