"""The project's PoC (playbooks/poc/sm120_hostwedge.py) against a fake `vllm` that records
the LLM(...) keyword arguments: the configs and the call must be the seed's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

from tests.support import agent_harness as h

POC = h.REPO / "playbooks" / "poc" / "sm120_hostwedge.py"
DONE = "REPROFLEET_POC_DONE engine constructed"

FAKE_VLLM = '''
import json, os, sys
__version__ = "0.25.1"

class LLM:
    def __init__(self, **kwargs):
        with open(os.environ["FAKE_VLLM_KWARGS"], "w") as handle:
            json.dump(kwargs, handle)
        replay = os.environ.get("FAKE_VLLM_REPLAY")
        if replay:
            with open(replay) as log:
                for line in log:
                    if "REPROFLEET_POC_DONE" not in line:
                        sys.stderr.write(line)
            sys.stderr.flush()
'''


def fake_vllm(root: Path) -> Path:
    package = root / "site" / "vllm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_VLLM)
    return root / "site"


def run_poc(tmp_path: Path, *flags: str) -> Tuple[subprocess.CompletedProcess, Dict[str, Any]]:
    site = fake_vllm(tmp_path)
    env = h.agent_env({"PYTHONPATH": str(site), "FAKE_VLLM_KWARGS": str(tmp_path / "kwargs.json")})
    result = subprocess.run([sys.executable, str(POC), "--workdir", str(tmp_path / "poc"), *flags], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return result, json.loads((tmp_path / "kwargs.json").read_text())


def test_the_poc_builds_the_seeds_engine_and_ends_with_the_done_line(tmp_path: Path) -> None:
    result, kwargs = run_poc(tmp_path)
    assert result.returncode == 0
    assert result.stdout.decode().splitlines()[-1] == DONE
    workdir = tmp_path / "poc"
    assert kwargs == {
        "model": str(workdir / "target"), "spec_method": "dflash", "spec_model": str(workdir / "drafter"),
        "spec_tokens": 9, "max_num_batched_tokens": 8192, "max_num_seqs": 32, "max_model_len": 262144,
        "gpu_memory_utilization": 0.87, "enable_prefix_caching": True, "load_format": "dummy",
        "skip_tokenizer_init": True,
    }


def test_the_target_config_has_the_seeds_layers_heads_and_quantization(tmp_path: Path) -> None:
    run_poc(tmp_path)
    target = json.loads((tmp_path / "poc" / "target" / "config.json").read_text())
    assert target["architectures"] == ["LagunaForCausalLM"] and target["num_hidden_layers"] == 48
    layer_types: List[str] = []
    for _ in range(12):
        layer_types += ["full_attention", "sliding_attention", "sliding_attention", "sliding_attention"]
    assert target["layer_types"] == layer_types
    assert target["num_attention_heads_per_layer"] == [48, 72, 72, 72] * 12
    assert (target["num_experts"], target["num_experts_per_tok"], target["sliding_window"]) == (256, 10, 512)
    assert target["rope_parameters"]["full_attention"]["attention_factor"] == 1.3465735902799727
    quant = target["quantization_config"]
    group = quant["config_groups"]["group_0"]
    assert group["targets"] == ["re:.*experts\\.[0-9]+\\.(gate_proj|up_proj|down_proj)$"]
    assert group["weights"] == {
        "actorder": None, "block_structure": None, "dynamic": False, "group_size": 16, "num_bits": 4,
        "observer": "memoryless_minmax", "observer_kwargs": {}, "scale_dtype": "torch.float8_e4m3fn",
        "strategy": "tensor_group", "symmetric": True, "type": "float", "zp_dtype": None}
    assert group["input_activations"] == dict(group["weights"], dynamic="local", observer="minmax")
    assert group["output_activations"] is None and group["format"] == "nvfp4-pack-quantized"
    assert quant["ignore"] == [
        "lm_head", "model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj",
        "re:.*\\.self_attn\\.(q_proj|k_proj|v_proj|o_proj|g_proj)$", "re:.*\\.mlp\\.gate$",
        "re:.*\\.mlp\\.shared_expert\\.(gate_proj|up_proj|down_proj)$"]
    assert quant["kv_cache_scheme"]["num_bits"] == 8 and quant["kv_cache_scheme"]["strategy"] == "tensor"
    assert (quant["quant_method"], quant["quantization_status"]) == ("compressed-tensors", "compressed")


def test_the_drafter_config_is_the_seeds_dflash_head(tmp_path: Path) -> None:
    run_poc(tmp_path)
    drafter = json.loads((tmp_path / "poc" / "drafter" / "config.json").read_text())
    assert drafter["architectures"] == ["DFlashLagunaForCausalLM"]
    assert drafter["layer_types"] == ["sliding_attention"] * 6 and drafter["num_attention_heads"] == 72
    assert drafter["eagle_aux_hidden_state_layer_ids"] == [2, 11, 20, 30, 39, 48]
    assert drafter["dflash_config"] == {"block_size": 16, "mask_token_id": 12, "num_target_layers": 48,
                                        "target_layer_ids": [1, 10, 19, 29, 38, 47], "causal": True}


def test_enforce_eager_and_moe_backend_are_passed_only_when_given(tmp_path: Path) -> None:
    _, kwargs = run_poc(tmp_path, "--enforce-eager", "--moe-backend", "cutlass", "--spec-tokens", "8")
    assert kwargs["enforce_eager"] is True and kwargs["moe_backend"] == "cutlass" and kwargs["spec_tokens"] == 8


def test_help_works_without_vllm(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, str(POC), "--help"], env=h.agent_env({"PYTHONPATH": str(tmp_path)}),
                            stdout=subprocess.PIPE, timeout=30)
    assert result.returncode == 0 and b"--spec-tokens" in result.stdout


def test_the_poc_under_the_agent_streams_phases_and_the_done_line(tmp_path: Path) -> None:
    site = fake_vllm(tmp_path)
    log = h.VLLM_LOGS / "v0.25.1-dflash-v1runner.log"
    env = h.agent_env({"PYTHONPATH": str(site), "FAKE_VLLM_KWARGS": str(tmp_path / "kwargs.json"),
                       "FAKE_VLLM_REPLAY": str(log)})
    rc, lines, _ = h.run_agent(tmp_path / "state", "run", "--id", "poc1", "--timeout", "30", "--sample-hz", "0",
                               "--", sys.executable, str(POC), "--workdir", str(tmp_path / "poc"), env=env)
    events = h.without_hb(lines)
    assert [e["phase"] for e in events if e["k"] == "phase"] == [
        "engine_init", "model_load", "torch_compile", "cuda_graph_capture", "kv_cache", "flashinfer_autotune",
        "attention_warmup", "kernel_warmup", "cuda_graph_capture", "ready"]  # the memory profile's capture; CuTeDSL last
    assert [e["line"] for e in events if e["k"] == "log"][-1] == DONE
    assert events[-1]["k"] == "exit" and events[-1]["rc"] == 0
