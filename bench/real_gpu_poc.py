"""What vLLM's start does on the GPU, without vLLM: the PoC of bench/real_gpu.py.

A decoder stack of PyTorch modules in bf16 (RMSNorm, fused QKV, attention over a small
cache, gated MLP) is built with random weights, warmed up, then captured as CUDA graphs for
~50 batch sizes (vLLM's default ladder 1, 2, 4, 8 .. 384 in steps of 8, largest first, one
shared memory pool), and the graphs are replayed for a while as a server would. Every step
prints the line vLLM prints at that point of its start (the design notes on vLLM start-up, rows 3
to 12, the agent's ``vllm_phases`` rules), so the agent's phase parser, the record's last
phase and the report's freeze figures run on real hardware. One ``REPROFLEET_BENCH {...}``
line at the end carries the capture's wall and CPU time.

It changes no GPU setting (no clock, power or persistence call: it only computes), and its
memory is a few GiB of plain allocations.

    python3 bench/real_gpu_poc.py --sizes 51 --serve-s 5
    python3 bench/real_gpu_poc.py --serve-commands   # bench/real_gpu.py's observer: capture on request
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import torch
from torch import nn

VERSION = "0.25.1+real-gpu-poc"  # what the engine banner says (the phase parser reads the banner, not the number)


def say(text: str) -> None:
    """One log line as vLLM's logger writes it (level, date, source)."""
    stamp = time.strftime("%m-%d %H:%M:%S")
    print(f"INFO {stamp} [real_gpu_poc.py] {text}", flush=True)


def capture_sizes(count: int) -> list[int]:
    """vLLM's ladder (1, 2, 4, then steps of 8), the first ``count`` sizes, largest first."""
    ladder = [1, 2, 4] + list(range(8, 8 * (count + 1), 8))
    return sorted(ladder[:count], reverse=True)


class RMSNorm(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(variance + 1e-6)).to(x.dtype) * self.weight


class Layer(nn.Module):
    """One decoder layer: attention of each new token over a fixed cache, then a gated MLP."""

    def __init__(self, hidden: int, heads: int, ffn: int, cache_len: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.norm1, self.norm2 = RMSNorm(hidden), RMSNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.out = nn.Linear(hidden, hidden, bias=False)
        self.gate_up = nn.Linear(hidden, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)
        self.register_buffer("k_cache", torch.randn(1, heads, cache_len, self.head_dim) * 0.02)
        self.register_buffer("v_cache", torch.randn(1, heads, cache_len, self.head_dim) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch = x.shape[0]
        q, _, _ = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q = q.view(1, batch, self.heads, self.head_dim).transpose(1, 2)
        attn = torch.nn.functional.scaled_dot_product_attention(q, self.k_cache, self.v_cache)
        x = x + self.out(attn.transpose(1, 2).reshape(batch, -1))
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(torch.nn.functional.silu(gate) * up)


class Model(nn.Module):
    def __init__(self, layers: int, hidden: int, heads: int, ffn: int, cache_len: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Layer(hidden, heads, ffn, cache_len) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def build(args: argparse.Namespace) -> tuple[Model, torch.Tensor]:
    torch.manual_seed(args.seed)
    with torch.device("cuda"):  # random weights drawn on the GPU (a CPU init of 1 GiB takes seconds)
        model = Model(args.layers, args.hidden, args.heads, args.ffn, args.cache_len)
    model = model.to(dtype=torch.bfloat16).eval()
    static_in = torch.randn(max(capture_sizes(args.sizes)), args.hidden, device="cuda", dtype=torch.bfloat16)
    return model, static_in


def cpu_probe() -> float:
    """Seconds a fixed piece of pure-Python work takes now, best of three: how fast this
    process's CPU is at this moment (a VM's vCPU speeds up and slows down with its host)."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        total = 0
        for i in range(60000):
            total += i * i
        best = min(best, time.perf_counter() - t0)
    return best


def inline_probe(loops: int) -> float:
    """Seconds ``loops`` iterations of fixed pure-Python work take, once: run between two
    sizes of a capture, the probes sum to how fast this thread's CPU was *during* the
    capture, not around it (a VM's vCPU changes speed within a second)."""
    t0 = time.perf_counter()
    total = 0
    for i in range(loops):
        total += i * i
    return time.perf_counter() - t0


def capture(model: Model, static_in: torch.Tensor, sizes: list[int], progress: bool,
            probe_loops: int = 0) -> dict[str, Any]:
    """Capture one graph per size into one pool, as vLLM does: a warm-up run, then the capture.

    Returns wall and CPU seconds of the whole capture (the process's CPU time: a capture is
    launch-bound, so a capture whose wall time runs far past its CPU time was not on a CPU).
    With ``probe_loops``, a fixed CPU probe runs before each size's warm-up (its time is
    summed in ``inline_probe_s`` and left out of ``work_s``, the capture's own seconds)."""
    graphs: list[torch.cuda.CUDAGraph] = []
    pool = None
    probed = 0.0
    torch.cuda.synchronize()
    probe_before = cpu_probe()
    t0 = time.time()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        for done, size in enumerate(sizes, 1):
            if probe_loops:
                probed += inline_probe(probe_loops)
            x = static_in[:size]
            model(x)  # vLLM's warm-up run before each capture
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                model(x)
            pool = graph.pool() if pool is None else pool
            graphs.append(graph)
            if progress and (done % 10 == 0 or done == len(sizes)):
                say(f"Capturing CUDA graphs (decode, FULL): {done}/{len(sizes)} sizes")
    torch.cuda.synchronize()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    t1 = time.time()
    return {"capture_s": wall, "capture_cpu_s": cpu, "graphs": graphs, "sizes": len(sizes), "t0": t0, "t1": t1,
            "cpu_probe_s": (probe_before + cpu_probe()) / 2, "inline_probe_s": probed, "work_s": wall - probed}


def replay(graphs: list[torch.cuda.CUDAGraph], seconds: float) -> int:
    """Replay the graphs round-robin for ``seconds`` (a server decoding); returns replays."""
    deadline, count = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        for graph in graphs:
            graph.replay()
            count += 1
        torch.cuda.synchronize()
    return count


def start(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    say(f"Initializing a V1 LLM engine (v{VERSION}) with config: model='poc-bf16', dtype=torch.bfloat16, "
        f"layers={args.layers}, hidden={args.hidden}, cudagraph_capture_sizes={args.sizes}")
    say("Starting to load model poc-bf16...")
    load0 = time.perf_counter()
    model, static_in = build(args)
    torch.cuda.synchronize()
    weights_gib = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**30
    say(f"Loading weights took {time.perf_counter() - load0:.2f} seconds")
    say(f"Model loading took {weights_gib:.4f} GiB and {time.perf_counter() - load0:.6f} seconds")
    warm0 = time.perf_counter()
    with torch.inference_mode():
        model(static_in)
    torch.cuda.synchronize()
    say(f"Initial profiling/warmup run took {time.perf_counter() - warm0:.2f} s")
    free, total = torch.cuda.mem_get_info()
    kv = torch.empty(int(min(args.kv_gib * 2**30, free * 0.5)), dtype=torch.uint8, device="cuda")
    say(f"Available KV cache memory: {kv.numel() / 2**30:.2f} GiB")
    say(f"GPU KV cache size: {kv.numel() // (2 * args.layers * args.hidden * 2):,} tokens")
    say("Skipping CuTeDSL warmup because no compile units were requested.")
    sizes = capture_sizes(args.sizes)
    say("Torch profiler disabled for CUDA graph capture")
    mem0 = torch.cuda.memory_reserved()
    result = capture(model, static_in, sizes, progress=True)
    took = (torch.cuda.memory_reserved() - mem0) / 2**30
    say(f"Graph capturing finished in {result['capture_s']:.0f} secs, took {took:.2f} GiB")
    say(f"init engine (profile, create kv cache, warmup model) took {time.perf_counter() - t0:.2f} seconds")
    replays = replay(result["graphs"], args.serve_s)
    print("REPROFLEET_BENCH " + json.dumps({
        "capture_s": round(result["capture_s"], 6), "capture_cpu_s": round(result["capture_cpu_s"], 6),
        "t0": result["t0"], "t1": result["t1"], "cpu_probe_s": result["cpu_probe_s"],
        "sizes": result["sizes"], "replays": replays, "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__}), flush=True)
    return 0


def serve_commands(args: argparse.Namespace) -> int:
    """For the observer bench: build once, then one capture per ``capture`` line on stdin,
    answered with one JSON line on stdout (the graphs are freed before the answer)."""
    if args.cpu is not None:  # one vCPU for the whole run: no migration between vCPUs mid-capture
        os.sched_setaffinity(0, {args.cpu})
    model, static_in = build(args)
    with torch.inference_mode():
        model(static_in)
    torch.cuda.synchronize()
    sizes = capture_sizes(args.sizes)
    print(json.dumps({"ready": True, "sizes": len(sizes), "cpus": sorted(os.sched_getaffinity(0))}), flush=True)
    for line in sys.stdin:
        if line.strip() != "capture":
            break
        result = capture(model, static_in, sizes, progress=False, probe_loops=args.probe_loops)
        del result["graphs"]
        torch.cuda.synchronize()
        print(json.dumps(result), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, default=51, help="how many batch sizes to capture")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--ffn", type=int, default=14336)
    parser.add_argument("--cache-len", type=int, default=256)
    parser.add_argument("--kv-gib", type=float, default=4.0)
    parser.add_argument("--serve-s", type=float, default=5.0, help="seconds of graph replay after the start")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--serve-commands", action="store_true")
    parser.add_argument("--cpu", type=int, help="with --serve-commands: run on this CPU only")
    parser.add_argument("--probe-loops", type=int, default=0,
                        help="with --serve-commands: a CPU probe of this many loops before each size (0: none)")
    # the campaign's cell args arrive as --name value pairs; the PoC takes what it knows
    args, _unknown = parser.parse_known_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    return serve_commands(args) if args.serve_commands else start(args)


if __name__ == "__main__":
    sys.exit(main())
