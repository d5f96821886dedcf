"""The software and firmware a host's GPU runs under, from its facts: the values a driver or
kernel upgrade changes, which a record's evidence depends on (a wedge under driver 610 says
nothing of 612)."""

from __future__ import annotations

from typing import Any, Mapping

STACK_KEYS = ("kernel", "driver", "cuda", "vbios")

LABELS = {"kernel": "kernel", "driver": "driver", "cuda": "CUDA", "vbios": "VBIOS"}

__all__ = ["LABELS", "STACK_KEYS", "software_stack", "stack_changes", "stack_words"]


def software_stack(facts: Mapping[str, Any] | None, gpu: int = 0) -> dict[str, str | None]:
    """Kernel release, NVIDIA driver, CUDA driver version and the GPU's VBIOS, as the facts say
    (None where the host could not tell)."""
    facts = facts or {}
    listed = facts.get("gpus")
    gpus: list[Any] = listed if isinstance(listed, list) else []
    card = next((g for g in gpus if isinstance(g, Mapping) and g.get("index") == gpu), None) or {}

    def text(value: Any) -> str | None:
        return None if value is None else str(value)

    return {"kernel": text(facts.get("kernel")), "driver": text(facts.get("driver_version")),
            "cuda": text(facts.get("cuda_driver_version")), "vbios": text(card.get("vbios"))}


def stack_changes(before: Mapping[str, str | None], after: Mapping[str, str | None]) -> dict[str, list[str | None]]:
    """Each stack value that differs: key -> [before, after]."""
    return {key: [before.get(key), after.get(key)] for key in STACK_KEYS if before.get(key) != after.get(key)}


def stack_words(stack: Mapping[str, str | None], keys: tuple[str, ...] = STACK_KEYS) -> str:
    """``driver 610.43, CUDA 13.0, kernel 6.8.0, VBIOS 96.00`` (only ``keys``); a stack no
    record could name (written before facts were kept by hash) is "host stack unknown"."""
    if not any(stack.get(key) for key in STACK_KEYS):
        return "host stack unknown"
    order = ("driver", "cuda", "kernel", "vbios")
    return ", ".join(f"{LABELS[key]} {stack.get(key) or '?'}" for key in order if key in keys)
