"""The engine-start log of the fake vLLM, step by step. Pure: builds data, prints nothing.

Lines, their order and their phases follow the design notes on vLLM startup and the seed's
timeline (KV cache -> FlashInfer autotune -> attention warm-up -> "Skipping CuTeDSL warmup",
the seed's last line, -> CUDA-graph capture). Durations are the real engine's, in seconds;
the engine multiplies them by the host's ``time_scale``. Dummy weights: no "Loading weights
took". ``enforce_eager`` removes torch.compile, graph-memory profiling and capture. vLLM >=
0.33 (V2 model runner) captures graphs before KV sizing.

Host-side module: standard library only.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

OUT, TQDM, FLASHINFER = "log", "tqdm", "flashinfer"
GIB = 1024


@dataclass(frozen=True)
class Line:
    kind: str  # log (INFO/WARNING line), tqdm (progress bar, stderr), flashinfer (own format)
    text: str
    source: str = ""  # file.py:line for log lines
    level: str = "INFO"
    main: bool = False  # printed by the front-end process, not the engine core


@dataclass(frozen=True)
class Step:
    phase: str
    delay_s: float  # real seconds before this step's lines
    lines: Tuple[Line, ...] = ()
    load: Optional[float] = None  # GPU load from here on
    memory_mib: Optional[int] = None
    decision: bool = False  # the wedge model decides before this step


@dataclass(frozen=True)
class EngineArgs:
    model: str
    version: Tuple[int, ...]
    version_text: str
    spec_method: Optional[str]
    spec_model: Optional[str]
    spec_tokens: Optional[int]
    enforce_eager: bool
    max_model_len: int
    gpu_memory_utilization: float
    moe_backend: Optional[str]
    compile_cache_hit: bool
    given: Tuple[Tuple[str, Any], ...] = ()  # the LLM(...) arguments, for "non-default args"
    # 0.33+: FlashInfer's managed autotune store as found at start (flashinfer_store.py): what vLLM
    # names as its root, its environment folder, and the ops it already holds
    autotune_store: Optional[Tuple[str, str, Tuple[str, ...]]] = None


def engine_args(model: str, kwargs: Mapping[str, Any], version_text: str, cache_hit: bool) -> EngineArgs:
    spec = dict(kwargs.get("speculative_config") or {})
    version = tuple(int(p) for p in version_text.split(".")[:3] if p.isdigit()) or (0, 25, 1)
    return EngineArgs(
        model=str(model), version=version, version_text=version_text,
        spec_method=kwargs.get("spec_method") or spec.get("method"),
        spec_model=kwargs.get("spec_model") or spec.get("model"),
        spec_tokens=kwargs.get("spec_tokens", spec.get("num_speculative_tokens")),
        enforce_eager=bool(kwargs.get("enforce_eager", False)),
        max_model_len=int(kwargs.get("max_model_len") or 262144),
        gpu_memory_utilization=float(kwargs.get("gpu_memory_utilization") or 0.9),
        moe_backend=kwargs.get("moe_backend"), compile_cache_hit=cache_hit,
        given=tuple(sorted(dict(kwargs, model=str(model)).items())),
    )


def cache_key(args: EngineArgs) -> str:
    return hashlib.sha256(f"{args.model}|{args.version_text}|{args.spec_model}".encode()).hexdigest()[:10]


def _log(source: str, text: str, level: str = "INFO", main: bool = False) -> Line:
    return Line(OUT, text, source, level, main)


def _bar(label: str, total: int, seconds: float) -> Tuple[Line, ...]:
    rate = total / max(seconds, 0.01)
    mm, ss = divmod(int(seconds), 60)
    return (Line(TQDM, f"{label}:   0%|          | 0/{total} [00:00<?, ?it/s]"),
            Line(TQDM, f"{label}: 100%|██████████| {total}/{total} [{mm:02d}:{ss:02d}<00:00, {rate:5.2f}it/s]"))


def config_step(a: EngineArgs) -> Step:
    spec = (f"SpeculativeConfig(method='{a.spec_method}', model='{a.spec_model}', "
            f"num_spec_tokens={a.spec_tokens})" if a.spec_method else "None")
    given = dict(a.given)
    for key in ("spec_method", "spec_model", "spec_tokens"):
        given.pop(key, None)
    if a.spec_method:
        given["speculative_config"] = {"method": a.spec_method, "model": a.spec_model,
                                       "num_speculative_tokens": a.spec_tokens}
    main = [_log("utils.py:326", f"non-default args: {given}", main=True),
            _log("model.py:547", "Resolved architecture: LagunaForCausalLM", main=True)]
    if a.max_model_len > 131072:
        main.append(_log("model.py:1895", f"User-specified max_model_len ({a.max_model_len}) is greater than the "
                         "derived max_model_len. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution.",
                         level="WARNING", main=True))
    if a.spec_model:
        main.append(_log("model.py:547", "Resolved architecture: DFlashLagunaForCausalLM", main=True))
    main += [_log("model.py:1561", f"Using max model len {a.max_model_len}", main=True),
             _log("scheduler.py:225", "Chunked prefill is enabled with max_num_batched_tokens=8192.", main=True)]
    return Step("engine_init", 0.6, tuple(main) + (
        _log("core.py:95", f"Initializing a V1 LLM engine (v{a.version_text}) with config: model='{a.model}', "
             f"speculative_config={spec}, skip_tokenizer_init=True, dtype=torch.bfloat16, "
             f"max_seq_len={a.max_model_len}, load_format=dummy, quantization=compressed-tensors, "
             f"enforce_eager={a.enforce_eager}, seed=0"),
        _log("parallel_state.py:1165", "world_size=1 rank=0 local_rank=0 distributed_init_method=tcp://127.0.0.1:"
             "48123 backend=nccl"),
        _log("parallel_state.py:1406", "rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0, EP rank 0"),
    ), load=0.02, memory_mib=520)


def load_steps(a: EngineArgs) -> List[Step]:
    start = ("Loading model from scratch..." if a.version >= (0, 33) else f"Starting to load model {a.model}...")
    moe = (a.moe_backend or "flashinfer_cutlass").upper()
    lines = [
        _log("gpu_model_runner.py:2921", start),
        _log("cuda.py:403", "Using FLASHINFER attention backend out of potential backends: "
             "['FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION']"),
        _log("nvfp4.py:214", f"Using {moe} NvFp4 MoE backend out of potential backends: "
             "['FLASHINFER_CUTLASS', 'FLASHINFER_TRTLLM', 'FLASHINFER_CUTEDSL', 'CUTLASS', 'MARLIN']"),
    ]
    done = [_log("base_loader.py:52", "Initializing model took 17.42 s")]
    if a.spec_model:
        done += [_log("gpu_model_runner.py:2868", "Loading drafter model..."),
                 _log("base_loader.py:52", "Initializing model took 1.07 s")]
    done.append(_log("gpu_model_runner.py:2903", "Model loading took 69.26 GiB memory and 19.871 seconds"))
    return [Step("model_load", 1.0, tuple(lines), load=0.25, memory_mib=4000),
            Step("model_load", 19.0, tuple(done), load=0.2, memory_mib=71_420)]


def compile_steps(a: EngineArgs) -> List[Step]:
    if a.enforce_eager:
        return []
    key, steps = cache_key(a), []
    head = "dflash_head" if a.version >= (0, 33) else "eagle_head"
    for part, seconds in (("backbone", 24.7), (head, 4.7)) if a.spec_model else (("backbone", 24.7),):
        lines = [_log("backends.py:612", f"Using cache directory: /root/.cache/vllm/torch_compile_cache/{key}/"
                      f"rank_0_0/{part} for vLLM's torch.compile")]
        if a.compile_cache_hit:
            took = seconds * 0.12
            lines.append(_log("backends.py:200", "Directly load the compiled graph(s) for compile range "
                              f"(1, 8192) from the cache, took {took:.3f} s"))
        else:
            took = seconds
            lines.append(_log("backends.py:626", f"Dynamo bytecode transform time: {seconds * 0.4:.2f} s"))
            lines.append(_log("backends.py:233", f"Compiling a graph for compile range (1, 8192) takes {seconds * 0.55:.2f} s"))
        lines.append(_log("monitor.py:34", f"torch.compile took {took:.2f} s in total"))
        steps.append(Step("torch_compile", took, tuple(lines), load=0.35))
    steps.append(Step("torch_compile", 1.4, (_log("gpu_worker.py:318", "Initial profiling/warmup run took 1.38 s"),),
                      load=0.6))
    if a.version < (0, 33):  # the V1 runner profiles graph memory; V2 captures right here instead
        steps.append(Step("kv_cache", 3.6, (
            _log("gpu_model_runner.py:4215", "Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=35 "
                 "(largest=256)"),
            _log("gpu_model_runner.py:4290", "Estimated CUDA graph memory: 1.19 GiB total"),
        ), load=0.7))
    return steps


def kv_step(a: EngineArgs) -> Step:
    lines = [_log("gpu_worker.py:395", "Available KV cache memory: 9.81 GiB")]
    if not a.enforce_eager:
        lines.append(_log("gpu_worker.py:410", "CUDA graph memory profiling is enabled (default since v0.21.0). "
                          f"The current --gpu-memory-utilization={a.gpu_memory_utilization:.4f} is equivalent to "
                          f"--gpu-memory-utilization={a.gpu_memory_utilization - 0.0117:.4f} without CUDA graph "
                          "memory profiling."))
    lines.append(_log("kv_cache_utils.py:1287", "GPU KV cache size: 268,024 tokens"))
    if a.version >= (0, 30):
        lines.append(_log("kv_cache_utils.py:1234", f"Maximum concurrency for {a.max_model_len:,} tokens per "
                          "request: 1.02x (268,024 tokens available)"))
    else:
        lines.append(_log("kv_cache_utils.py:1234", f"Maximum concurrency for {a.max_model_len:,} tokens per request: 1.02x"))
    return Step("kv_cache", 1.2, tuple(lines), load=0.3, memory_mib=int(97887 * a.gpu_memory_utilization))


MANAGED_OPS = (("fp4_gemm", "CutlassFp4GemmRunner", 3.4), ("trtllm::fused_moe::gemm1", "MoERunner", 4.1),
               ("trtllm::fused_moe::gemm2", "MoERunner", 3.2))  # flashinfer_store.OPS, with their tuning time


def managed_autotune_steps(a: EngineArgs) -> List[Step]:
    """0.33+ on one node: FlashInfer's managed store (kernel_warmup.py:478-493); an op found in it is a
    cache hit, logged once, and is not profiled; the others show their tuning bars."""
    root_words, env_dir, hits = a.autotune_store or ("flashinfer default", "", ())
    head = (_log("gpu_worker.py:402", "JIT kernel warmup starting."),
            _log("kernel_warmup.py:486", f"Using FlashInfer managed autotune cache (root={root_words}). Pass "
                 "--disable-flashinfer-autotune to skip autotuning."),
            Line(FLASHINFER, "[Autotuner]: Managed autotune cache attached for this process: "
                 f"ManagedAutotuneCache(env_dir={env_dir!r}, hits=0, misses=0)", "autotune_cache.py:320"),
            _log("kernel_warmup.py:372", "Running FlashInfer autotune with 8192 tokens and token buckets (1, 2, 4, 8, "
                 "16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)."),
            Line(FLASHINFER, "[Autotuner]: Autotuning process starts ...", "autotuner.py:976"))
    tuning: List[Line] = []
    for op, runner, seconds in MANAGED_OPS:
        tuning += ([Line(FLASHINFER, f"[Autotuner]: Config cache hit for {op} (runner={runner}, source=managed cache)",
                         "autotuner.py:1919")] if op in hits else list(_bar(f"[AutoTuner]: Tuning {op}", 14, seconds)))
    tuning.append(Line(FLASHINFER, "[Autotuner]: Autotuning process ends", "autotuner.py:999"))
    tuned_s = sum(seconds for op, _, seconds in MANAGED_OPS if op not in hits)
    return [Step("flashinfer_autotune", 1.0, head, load=0.9),
            Step("flashinfer_autotune", 0.3 + tuned_s, tuple(tuning), load=0.95)]


def warmup_steps(a: EngineArgs) -> List[Step]:
    if a.version >= (0, 33):
        return managed_autotune_steps(a) + [
            Step("attention_warmup", 0.4, (_log("kernel_warmup.py:131", "Warming up FlashInfer attention."),), load=0.7)]
    key = cache_key(a)
    pre = [_log("gpu_worker.py:402", "JIT kernel warmup starting.")] if a.version >= (0, 30) else []
    autotune = pre + [_log("kernel_warmup.py:72", f"Using FlashInfer autotune cache file: "
                           f"/root/.cache/vllm/flashinfer_autotune/{key}.json")]
    if a.version >= (0, 30):
        autotune.append(_log("kernel_warmup.py:80", "Running FlashInfer autotune with max_num_tokens=8192"))
    autotune.append(Line(FLASHINFER, "[Autotuner]: Autotuning process starts ...", "autotuner.py:256"))
    tuning = (_bar("[AutoTuner]: Tuning fp4_gemm", 14, 3.4)
              + _bar("[AutoTuner]: Tuning trtllm::fused_moe::gemm1", 14, 4.1)
              + _bar("[AutoTuner]: Tuning trtllm::fused_moe::gemm2", 14, 3.2)
              + (Line(FLASHINFER, "[Autotuner]: Autotuning process ends", "autotuner.py:265"),
                 _log("kernel_warmup.py:71", "Saved FlashInfer autotune results (42 configs).")))
    steps = [Step("flashinfer_autotune", 1.0, tuple(autotune), load=0.9),
             Step("flashinfer_autotune", 10.8, tuning, load=0.95),
             Step("attention_warmup", 0.4, (_log("kernel_warmup.py:131", "Warming up FlashInfer attention."),), load=0.7)]
    if a.version < (0, 30):  # DEBUG from 0.30 on; in 0.25 the seed's last line before the freeze
        steps.append(Step("kernel_warmup", 0.9, (_log("cutedsl_warmup.py:47", "Skipping CuTeDSL warmup because no "
                                                        "compile units were requested."),), load=0.4))
    return steps


def capture_steps(a: EngineArgs) -> List[Step]:
    if a.enforce_eager:  # no capture, but the moment it would start still exists
        return [Step("cuda_graph_capture", 0.0, (), decision=True)]
    lines: List[Line] = []
    if a.version >= (0, 30):
        lines.append(_log("gpu_model_runner.py:4467", "Torch profiler disabled for CUDA graph capture"))
    if a.version >= (0, 33):
        lines += list(_bar("Capturing CUDA graphs (PIECEWISE)", 51, 3.1) + _bar("Capturing CUDA graphs (FULL)", 35, 1.9))
    else:
        lines += list(_bar("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)", 51, 3.1)
                      + _bar("Capturing CUDA graphs (decode, FULL)", 35, 1.9))
    if a.spec_method == "dflash":
        lines.append(_log("speculator.py:211", "Capturing model for DFlash speculator..."))
        lines += list(_bar("Capturing dflash CUDA graphs (FULL)", 35, 1.1))
    done = (_log("gpu_model_runner.py:4412", "Graph capturing finished in 6 secs, took 1.19 GiB"),
            _log("gpu_worker.py:512", "CUDA graph pool memory: 1.19 GiB (actual), 1.19 GiB (estimated)"))
    return [Step("cuda_graph_capture", 2.0, tuple(lines[:1]), load=0.85, decision=True),
            Step("cuda_graph_capture", 6.0, tuple(lines[1:]) + done, load=0.85)]


def ready_step(a: EngineArgs, total_s: float, compile_s: float) -> Step:
    tail = "" if a.enforce_eager else f" (compilation: {compile_s:.2f} s)"
    return Step("ready", 0.3, (
        _log("core.py:272", f"init engine (profile, create kv cache, warmup model) took {total_s:.2f} s{tail}"),
        _log("llm.py:352", "Supported tasks: ['generate']", main=True)), load=0.03)


def timeline(a: EngineArgs) -> List[Step]:
    """Every step of one engine start, in order; exactly one has ``decision=True``."""
    body = [config_step(a)] + load_steps(a) + compile_steps(a)
    if a.version >= (0, 33):
        body += capture_steps(a) + [kv_step(a)] + warmup_steps(a)
    else:
        body += [kv_step(a)] + warmup_steps(a) + capture_steps(a)
    compile_s = sum(s.delay_s for s in body if s.phase == "torch_compile")
    init_s = sum(s.delay_s for s in body if s.phase not in ("engine_init", "model_load"))
    return body + [ready_step(a, init_s, compile_s)]


def move_decision(steps: List[Step], phase: str) -> List[Step]:
    """Put the wedge model's decision at the first step of ``phase`` (configurable wedge_phase)."""
    target = next((i for i, s in enumerate(steps) if s.phase == phase), None)
    if target is None:
        return steps
    return [Step(s.phase, s.delay_s, s.lines, s.load, s.memory_mib, decision=(i == target))
            for i, s in enumerate(steps)]
