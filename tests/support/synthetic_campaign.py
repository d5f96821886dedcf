"""Campaign folders written the way a controller writes them, for report tests without a fleet.

A campaign here has records with factors and cell identities, a manifest, a stream per
attempt (NVML samples at 10 Hz, vLLM phases, log lines, a tagged kernel line before a
wedge), power.jsonl, events.jsonl (a quarantine, a pause) and facts per host (the hosts'
VBIOS differ). Outcomes are drawn from a seeded generator, so the same call gives the
same folder.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from reprofleet.records.identity import cell_id

PHASES = ("engine_init", "model_load", "torch_compile", "kv_cache", "kernel_warmup", "flashinfer_autotune",
          "attention_warmup", "cuda_graph_capture", "ready")
T0 = datetime(2026, 11, 30, 8, 0, tzinfo=timezone.utc)
POC = "4c087a87a028a4732073bc25e68feccfbe34b2122bb351d238dfd85690e7d33b"
ENV = {"CUTE_DSL_ARCH": "sm_120a", "VLLM_USE_FLASHINFER_SAMPLER": "0"}
RUNTIME = {"kind": "docker", "image": "vllm/vllm-openai:v0.25.1", "python": None, "docker_args": ["--ipc", "host"]}
CELLS: dict[str, dict[str, Any]] = {
    "default": {"graphics_clocks": None, "power_limit": None},
    "lgc-2800": {"graphics_clocks": [180, 2800], "power_limit": None},
    "pl-350": {"graphics_clocks": None, "power_limit": 350.0},
}


def factors(cell: str) -> dict[str, Any]:
    return {"application_clocks": None, "memory_clocks": None, "persistence": None, **CELLS[cell], "env": ENV,
            "args": {"gpu_memory_utilization": 0.87, "spec_tokens": 9}, "vars": {"vllm": "0.25.1"}, "runtime": RUNTIME}


def record_runtime() -> dict[str, Any]:
    return {"cache_key": "vllm_vllm-openai_v0.25.1-2ff843d9", "kind": "docker", "label": "vllm/vllm-openai:v0.25.1"}


def iso(when: datetime) -> str:
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Spec:
    """What to write: hosts (with the controller that ran each), cells, attempts, wedge rates."""

    campaign: str = "synthetic-1"
    hosts: dict[str, str] = field(default_factory=lambda: {"ws2": "ctl-a", "ws10": "ctl-b"})
    cells: tuple[str, ...] = ("default", "lgc-2800", "pl-350")
    attempts: int = 6  # per cell and host
    wedge_rate: dict[str, float] = field(default_factory=lambda: {"default": 0.5, "lgc-2800": 0.0, "pl-350": 0.2})
    seconds: float = 45.0  # of telemetry per attempt
    seed: int = 7


def _stream(rng: random.Random, start: float, seconds: float, outcome: str) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    seq = 0
    phase_at = sorted(rng.uniform(0, seconds * 0.95) for _ in PHASES[:-1])
    reached = len(PHASES) if outcome == "clean" else rng.randint(4, len(PHASES) - 1)
    phases = list(zip(phase_at, PHASES))[:reached]
    for step in range(int(seconds * 10)):
        t = start + step / 10
        busy = any(t - start >= p for p, _ in phases[1:2])
        lines.append({"t": t, "k": "nvml", "seq": seq, "gpu": 0, "gfx_mhz": (3090 if busy else 210) - rng.randint(0, 60),
                      "power_w": round((480 if busy else 35) + rng.uniform(-20, 20), 2), "temp_c": 40 + step // 30})
        seq += 1
        for at, phase in phases:
            if step / 10 <= at < (step + 1) / 10:
                lines.append({"t": t, "k": "phase", "seq": seq, "phase": phase, "line": f"INFO entering {phase}"})
                lines.append({"t": t, "k": "log", "seq": seq + 1, "line": f"(EngineCore) INFO {phase} started", "stream": "out"})
                seq += 2
    if outcome == "wedge":
        lines.append({"t": start + seconds, "k": "kmsg", "seq": seq, "line": "NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.",
                      "tags": ["xid", "nvrm"]})
    else:
        lines.append({"t": start + seconds, "k": "exit", "seq": seq, "rc": 0})
    return lines


def build(spec: Spec) -> dict[str, Any]:
    """Every file of the campaign, in memory: records, streams, power, events, facts, manifest."""
    rng = random.Random(spec.seed)
    records, streams, power, events = [], {}, [], []
    clock = {host: T0 for host in spec.hosts}
    for index in range(spec.attempts):
        for cell in spec.cells:
            for host, controller in spec.hosts.items():
                outcome = "wedge" if rng.random() < spec.wedge_rate.get(cell, 0.0) else "clean"
                if rng.random() < 0.05:
                    outcome = "infra"
                started = clock[host]
                attempt = f"{spec.campaign}-{host}-{cell}-{index}"
                lines = _stream(rng, started.timestamp(), spec.seconds, outcome) if outcome != "infra" else []
                last = started + timedelta(seconds=spec.seconds)
                record = {
                    "schema": 1, "campaign": spec.campaign, "attempt": attempt, "controller": controller, "host": host,
                    "cell": cell, "cell_id": cell_id(cell, factors(cell), record_runtime(), POC), "factors": factors(cell),
                    "runtime": record_runtime(), "poc": POC, "policy": None, "cache": None, "attempt_index": index,
                    "attempt_in_boot": 1, "cold_boot": index == 0, "boot_id": f"boot-{host}-{index}",
                    "started": iso(started), "ended": iso(last + timedelta(seconds=4)), "outcome": outcome,
                    "reason": "not run: ssh refused" if outcome == "infra" else ("host stopped answering" if outcome == "wedge" else "exit 0"),
                    "last_heartbeat": iso(last), "detect_latency_s": 3.2 if outcome == "wedge" else None,
                    "last_phase": next((l["phase"] for l in reversed(lines) if l["k"] == "phase"), None),
                    "last_log_line": next((l["line"] for l in reversed(lines) if l["k"] == "log"), None),
                    "stream": f"streams/{attempt}.jsonl" if lines else None,
                    "facts": facts_hash(host, list(spec.hosts).index(host)), "telemetry": None, "forensics": None, "wedge_declared": None, "exit_code": None,
                }
                records.append(record)
                if lines:
                    streams[attempt] = lines
                clock[host] = last + timedelta(seconds=10)
                if outcome == "wedge":
                    for action in ("off", "on"):
                        power.append({"action": action, "host": host, "result": "ok", "state": action,
                                      "time": iso(clock[host]), "outlet": "1", "driver": "tasmota"})
                    clock[host] += timedelta(seconds=30)
    first = sorted(spec.hosts)[0]
    events.append({"t": iso(T0 + timedelta(seconds=100)), "host": first, "event": "controller_network_suspect"})
    events.append({"t": iso(T0 + timedelta(seconds=160)), "host": first, "event": "controller_network_back"})
    events.append({"t": iso(max(clock.values())), "host": first, "event": "quarantined", "reason": "recovery failed"})
    facts = {host: _facts(host, i) for i, host in enumerate(spec.hosts)}
    manifest = {"campaign": spec.campaign, "controller": "ctl-a", "cells": [
        {"name": c, "cell_id": cell_id(c, factors(c), record_runtime(), POC), "factors": factors(c)} for c in spec.cells],
        "judging": {"reproductions": ["wedge"], "at_risk_phase": None, "max_excluded_share": 0.2},
        "reference": spec.cells[0], "poc": POC}
    return {"records": records, "streams": streams, "power": power, "events": events, "facts": facts, "manifest": manifest}


def facts_hash(host: str, index: int) -> str:
    """What a record carries: the sha256 of its host's facts file (records.write_facts)."""
    return hashlib.sha256(json.dumps(_facts(host, index), sort_keys=True, default=str).encode()).hexdigest()


def _facts(host: str, index: int) -> dict[str, Any]:
    return {"hostname": host, "kernel": "6.8.0-49-generic", "driver_version": "610.43.03", "cuda_driver_version": "13.3",
            "os": {"pretty_name": "Ubuntu 24.04.1 LTS"}, "journal_persistent": index == 0, "docker": "28.3.2",
            "dmi": {"board_vendor": "ASUSTeK", "board_name": "ROG STRIX X870E-E", "bios_vendor": "AMI",
                    "bios_version": "1402", "bios_date": "2025-08-01"},
            "gpus": [{"index": 0, "name": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
                      "vbios": f"98.02.81.00.0{7 + index}", "pci_bus_id": "00000000:01:00.0",
                      "power_limit_w": {"default": 600.0, "max": 600.0}}],
            "cpu": {"model": "AMD Ryzen 9 9950X"}, "memory_bytes": 192 * 2**30, "nvml": "ok", "python": "3.12.3"}


def write(folder: Path, content: dict[str, Any], *, attempts: set[str] | None = None, hosts: set[str] | None = None) -> Path:
    """Write (a part of) a built campaign: only ``attempts`` and the side files of ``hosts`` when given."""
    (folder / "streams").mkdir(parents=True, exist_ok=True)
    (folder / "facts").mkdir(exist_ok=True)
    records = [r for r in content["records"] if attempts is None or r["attempt"] in attempts]
    (folder / "attempts.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    for record in records:
        if record["stream"]:
            lines = content["streams"][record["attempt"]]
            (folder / record["stream"]).write_text("".join(json.dumps(l) + "\n" for l in lines))
    keep = (lambda e: hosts is None or e.get("host") in hosts)
    (folder / "power.jsonl").write_text("".join(json.dumps(p) + "\n" for p in content["power"] if keep(p)))
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in content["events"] if keep(e)))
    for host, facts in content["facts"].items():
        if hosts is None or host in hosts:
            (folder / "facts" / f"{host}.json").write_text(json.dumps(facts, sort_keys=True) + "\n")
    (folder / "campaign.json").write_text(json.dumps(content["manifest"]))
    return folder
