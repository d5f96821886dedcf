#!/usr/bin/env python3
"""Offline vLLM engine start that hard-locks RTX PRO 6000 Blackwell hosts (the seed's PoC).

Written for reprofleet from the synthetic configs in the seed report
(the seed bug report in the design notes): a Laguna MoE target (NVFP4, 48 layers) with a DFlash
drafter, dummy weights, no tokenizer, no download. It stops once the engine is constructed,
i.e. right after CUDA-graph capture, which is where the seed's hosts froze. Run it twice
with one vLLM cache, as the seed did; the defaults are the seed's values.

vLLM is imported only when the engine is built, so ``--help`` and the config writer work
on a machine without vLLM.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

DONE_LINE = "REPROFLEET_POC_DONE engine constructed"

NVFP4_TENSOR_GROUP: Dict[str, Any] = {
    "actorder": None,
    "block_structure": None,
    "group_size": 16,
    "num_bits": 4,
    "observer_kwargs": {},
    "scale_dtype": "torch.float8_e4m3fn",
    "strategy": "tensor_group",
    "symmetric": True,
    "type": "float",
    "zp_dtype": None,
}


def target_config() -> Dict[str, Any]:
    """The seed's LagunaForCausalLM target: 12 blocks of 1 full + 3 sliding attention layers."""
    return {
        "architectures": ["LagunaForCausalLM"],
        "model_type": "laguna",
        "hidden_size": 3072,
        "intermediate_size": 12288,
        "num_hidden_layers": 48,
        "max_position_embeddings": 262144,
        "num_experts": 256,
        "num_experts_per_tok": 10,
        "moe_intermediate_size": 1024,
        "shared_expert_intermediate_size": 1024,
        "torch_dtype": "bfloat16",
        "gating": "per-head",
        "sliding_window": 512,
        "layer_types": (["full_attention"] + ["sliding_attention"] * 3) * 12,
        "num_attention_heads_per_layer": [48, 72, 72, 72] * 12,
        "moe_routed_scaling_factor": 2.5,
        "rope_parameters": {
            "full_attention": {
                "rope_theta": 500000.0,
                "rope_type": "yarn",
                "factor": 32.0,
                "original_max_position_embeddings": 8192,
                "beta_slow": 1.0,
                "beta_fast": 32.0,
                "attention_factor": 1.3465735902799727,
                "partial_rotary_factor": 0.5,
            },
            "sliding_attention": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 1.0,
            },
        },
        "quantization_config": quantization_config(),
    }


def quantization_config() -> Dict[str, Any]:
    """compressed-tensors NVFP4 for the routed experts; attention, gates, shared experts,
    layer 0's dense MLP and lm_head stay unquantized; FP8 KV cache."""
    activations = dict(NVFP4_TENSOR_GROUP, dynamic="local", observer="minmax")
    weights = dict(NVFP4_TENSOR_GROUP, dynamic=False, observer="memoryless_minmax")
    return {
        "config_groups": {
            "group_0": {
                "format": "nvfp4-pack-quantized",
                "input_activations": activations,
                "output_activations": None,
                "targets": [r"re:.*experts\.[0-9]+\.(gate_proj|up_proj|down_proj)$"],
                "weights": weights,
            }
        },
        "format": "nvfp4-pack-quantized",
        "ignore": [
            "lm_head",
            "model.layers.0.mlp.gate_proj",
            "model.layers.0.mlp.up_proj",
            "model.layers.0.mlp.down_proj",
            r"re:.*\.self_attn\.(q_proj|k_proj|v_proj|o_proj|g_proj)$",
            r"re:.*\.mlp\.gate$",
            r"re:.*\.mlp\.shared_expert\.(gate_proj|up_proj|down_proj)$",
        ],
        "kv_cache_scheme": {
            "actorder": None,
            "block_structure": None,
            "dynamic": False,
            "group_size": None,
            "num_bits": 8,
            "observer": "minmax",
            "observer_kwargs": {},
            "scale_dtype": None,
            "strategy": "tensor",
            "symmetric": True,
            "type": "float",
            "zp_dtype": None,
        },
        "quant_method": "compressed-tensors",
        "quantization_status": "compressed",
    }


def drafter_config() -> Dict[str, Any]:
    """The seed's DFlash drafter: 6 sliding-attention layers reading 6 target layers."""
    return {
        "architectures": ["DFlashLagunaForCausalLM"],
        "model_type": "laguna",
        "draft_vocab_size": 100352,
        "hidden_size": 3072,
        "intermediate_size": 12288,
        "num_hidden_layers": 6,
        "num_attention_heads": 72,
        "max_position_embeddings": 262144,
        "sliding_window": 512,
        "layer_types": ["sliding_attention"] * 6,
        "rope_theta": 10000.0,
        "gating": "per-head",
        "num_experts": 0,
        "torch_dtype": "bfloat16",
        "eagle_aux_hidden_state_layer_ids": [2, 11, 20, 30, 39, 48],
        "dflash_config": {
            "block_size": 16,
            "mask_token_id": 12,
            "num_target_layers": 48,
            "target_layer_ids": [1, 10, 19, 29, 38, 47],
            "causal": True,
        },
    }


def write_synthetic_configs(root: str) -> Tuple[str, str]:
    """Write target/config.json and drafter/config.json under `root`; return both dirs."""
    target_dir, drafter_dir = Path(root) / "target", Path(root) / "drafter"
    for directory, config in ((target_dir, target_config()), (drafter_dir, drafter_config())):
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "config.json").write_text(json.dumps(config))
    return str(target_dir), str(drafter_dir)


def engine_kwargs(args: argparse.Namespace, target: str, drafter: str) -> Dict[str, Any]:
    """The seed's LLM(...) call; enforce_eager and moe_backend only when asked for."""
    kwargs: Dict[str, Any] = {
        "model": target,
        "spec_method": args.spec_method,
        "spec_model": drafter,
        "spec_tokens": args.spec_tokens,
        "max_num_batched_tokens": args.max_num_batched_tokens,
        "max_num_seqs": args.max_num_seqs,
        "max_model_len": args.max_model_len,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "enable_prefix_caching": True,
        "load_format": "dummy",
        "skip_tokenizer_init": True,
    }
    if args.enforce_eager:
        kwargs["enforce_eager"] = True
    if args.moe_backend:
        kwargs["moe_backend"] = args.moe_backend
    return kwargs


def parse_args(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec-tokens", type=int, default=9, help="speculative tokens (seed: 9 wedges, <= 8 ran clean)")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.87)
    parser.add_argument("--max-model-len", type=int, default=262144)
    parser.add_argument("--max-num-seqs", type=int, default=32)
    parser.add_argument("--max-num-batched-tokens", type=int, default=8192)
    parser.add_argument("--enforce-eager", action="store_true", help="no torch.compile, no CUDA graphs")
    parser.add_argument("--moe-backend", default=None, help="NVFP4 MoE backend (default: vLLM's auto choice)")
    parser.add_argument("--spec-method", default="dflash")
    parser.add_argument("--workdir", default="/tmp/sm120-wedge-poc", help="where the synthetic configs go")
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    target, drafter = write_synthetic_configs(args.workdir)
    kwargs = engine_kwargs(args, target, drafter)
    print("REPROFLEET_POC configs written: target=%s drafter=%s" % (target, drafter), flush=True)
    import vllm  # lazily: --help and the configs need no vLLM

    print("REPROFLEET_POC vllm %s LLM(%s)" % (getattr(vllm, "__version__", "?"), json.dumps(kwargs, sort_keys=True)),
          flush=True)
    llm = vllm.LLM(**kwargs)
    print(DONE_LINE, flush=True)
    del llm
    return 0


if __name__ == "__main__":
    sys.exit(main())
