"""The fake vLLM: a realistic engine-start log, GPU load, and the wedge model's outcome."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from reprofleet.sim import SimHostSpec
from reprofleet.sim.rfsim import engine, vllm_log
from tests.support.paths import REPO

SEED_KWARGS = dict(spec_method="dflash", spec_model="/tmp/sm120-wedge-poc/drafter", spec_tokens=9,
                   max_num_batched_tokens=8192, max_num_seqs=32, max_model_len=262144,
                   gpu_memory_utilization=0.87, enable_prefix_caching=True, load_format="dummy",
                   skip_tokenizer_init=True)
POC = (
    "import sys\nfrom vllm import LLM\n"
    f"kwargs = {SEED_KWARGS!r}\n"
    "kwargs.update(eval(sys.argv[1]) if len(sys.argv) > 1 else {})\n"
    "LLM(model='/tmp/sm120-wedge-poc/target', **kwargs)\n"
    "print('REPROFLEET_POC_DONE engine constructed', flush=True)\n"
)


def rendered(version: str, **overrides: object) -> list[str]:
    args = vllm_log.engine_args("/tmp/t", dict(SEED_KWARGS, **overrides), version, cache_hit=False)
    return [engine.render(line, args, 11, 10) for step in vllm_log.timeline(args) for line in step.lines]


def agent_phases(lines: list[str]) -> list[str]:
    sys.path.insert(0, str(REPO / "collectors"))
    try:
        import vllm_phases
    finally:
        sys.path.pop(0)
    return [phase for _, phase in vllm_phases.phases_of(lines)]


def test_the_seed_version_freezes_right_after_its_last_line_skipping_cutedsl_warmup() -> None:
    args = vllm_log.engine_args("/tmp/t", SEED_KWARGS, "0.25.1", cache_hit=False)
    steps = vllm_log.timeline(args)
    decisions = [i for i, step in enumerate(steps) if step.decision]
    assert len(decisions) == 1 and steps[decisions[0]].phase == "cuda_graph_capture"
    before = [line.text for step in steps[: decisions[0]] for line in step.lines]
    assert before[-1] == "Skipping CuTeDSL warmup because no compile units were requested."
    assert not any("Capturing" in text for text in before)
    assert not any("Loading weights took" in text for text in before)  # dummy weights


def test_the_agents_phase_parser_sees_every_phase_in_order() -> None:
    assert agent_phases(rendered("0.25.1")) == [
        "engine_init", "model_load", "torch_compile", "cuda_graph_capture", "kv_cache", "flashinfer_autotune",
        "attention_warmup", "kernel_warmup", "cuda_graph_capture", "ready"]  # profile capture; CuTeDSL last
    assert agent_phases(rendered("0.33.0")).index("cuda_graph_capture") < agent_phases(rendered("0.33.0")).index("kv_cache")


def test_line_prefixes_follow_the_version() -> None:
    old, new = rendered("0.25.1"), rendered("0.31.0")
    assert all(line.startswith("(EngineCore pid=11) ") for line in old if "Capturing" in line or "Autotuner" in line)
    assert any(line.startswith("Capturing CUDA graphs") for line in new)
    assert any(line.startswith("(MainProcess pid=10) INFO ") for line in new)
    assert any(line.startswith("INFO ") for line in old)


def test_enforce_eager_drops_compile_and_capture_but_keeps_the_decision_point() -> None:
    args = vllm_log.engine_args("/tmp/t", dict(SEED_KWARGS, enforce_eager=True), "0.25.1", cache_hit=False)
    steps = vllm_log.timeline(args)
    texts = " ".join(line.text for step in steps for line in step.lines)
    assert "torch.compile" not in texts and "Capturing" not in texts
    assert [step.phase for step in steps if step.decision] == ["cuda_graph_capture"]


def test_the_decision_point_moves_with_wedge_phase() -> None:
    args = vllm_log.engine_args("/tmp/t", SEED_KWARGS, "0.25.1", cache_hit=False)
    steps = vllm_log.move_decision(vllm_log.timeline(args), "flashinfer_autotune")
    assert [step.phase for step in steps if step.decision] == ["flashinfer_autotune"]


def start_poc(tree, *extra: str, **env: str) -> subprocess.Popen:
    poc = tree.home / "poc.py"
    poc.write_text(POC)
    return subprocess.Popen(["/usr/bin/python3", str(poc), *extra], env=tree.env(**env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def decisions(tree) -> list[dict]:
    path = tree.hw / "decisions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_clean_and_error_outcomes_end_the_poc_with_0_and_1(sim_host_tree) -> None:
    tree = sim_host_tree(SimHostSpec("poc", script=("clean", "error"), time_scale=0.001))
    clean = start_poc(tree)
    out, _ = clean.communicate(timeout=30)
    assert clean.returncode == 0 and out.rstrip().endswith("REPROFLEET_POC_DONE engine constructed")
    assert "Compiling a graph for compile range" in out
    failed = start_poc(tree)
    out, _ = failed.communicate(timeout=30)
    assert failed.returncode == 1
    assert "EngineCore failed to start." in out and "RuntimeError: Engine core initialization failed" in out
    assert "Directly load the compiled graph" in out  # the compile cache of the first start was kept
    assert [(d["attempt"], d["outcome"], d["source"]) for d in decisions(tree)] == [
        (0, "clean", "script"), (1, "error", "script")]


@pytest.mark.parametrize("outcome", ["wedge", "reboot", "hang"])
def test_wedge_reboot_and_hang_stop_the_log_and_leave_the_engine_running(sim_host_tree, outcome: str) -> None:
    tree = sim_host_tree(SimHostSpec("poc", script=(outcome,), time_scale=0.001,
                                     hardware_watchdog=outcome == "reboot"))  # a reboot is its watchdog's reset
    poc = start_poc(tree)
    try:
        deadline = time.monotonic() + 20
        while not decisions(tree) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)
        assert poc.poll() is None, "the engine must not exit"
        requests = [json.loads(p.read_text()) for p in (tree.hw / "requests").glob("*.json")]
        assert [r["kind"] for r in requests] == ([] if outcome == "hang" else [outcome])
        load = json.loads((tree.hw / "gpu0.load.json").read_text())
        assert load["pid"] == poc.pid and load["level"] > 0.5
    finally:
        poc.send_signal(signal.SIGKILL)
        out, _ = poc.communicate(timeout=10)
    assert "Capturing CUDA graphs" not in out and "Skipping CuTeDSL warmup" in out.splitlines()[-1]


def test_the_model_reads_the_clock_lock_the_gpu_actually_has(sim_host_tree) -> None:
    tree = sim_host_tree(SimHostSpec("lock", p_wedge=1.0, p_error=0.0, p_hang=0.0, time_scale=0.001))
    assert tree.run(["nvidia-smi", "-lgc", "180,2800"]).returncode == 0
    poc = start_poc(tree, "{'spec_tokens': 9}", CUDA_LAUNCH_BLOCKING="0")
    assert poc.wait(timeout=30) == 0
    (decision,) = decisions(tree)
    assert decision["outcome"] == "clean" and decision["conditions"]["graphics_ceiling_mhz"] == 2800


def test_the_docker_image_tag_sets_the_vllm_version(sim_host_tree) -> None:
    tree = sim_host_tree(SimHostSpec("ver", script=("clean",), time_scale=0.001))
    poc = start_poc(tree, RFSIM_VLLM_VERSION="0.26.0")
    out, _ = poc.communicate(timeout=30)
    assert "Initializing a V1 LLM engine (v0.26.0)" in out
    assert decisions(tree)[0]["conditions"]["vllm_version"] == "0.26.0"


def test_vllm_033_fills_flashinfers_managed_store_where_its_env_says_and_the_next_start_tunes_nothing(
        sim_host_tree, tmp_path) -> None:
    """FlashInfer's managed autotune store (rfsim/flashinfer_store.py): the first start tunes every op
    and publishes it under FLASHINFER_AUTOTUNE_CACHE_DIR; the next start with the same folder logs a
    managed-cache hit per op and shows no tuning bar; a start without it (another default root) tunes again."""
    tree = sim_host_tree(SimHostSpec("fis", script=("clean",) * 3, time_scale=0.001, vllm_version="0.33.0"))
    store = tmp_path / "campaign-cache" / "flashinfer_autotune"
    outs = []
    for root in (store, store, None):
        env = {"FLASHINFER_AUTOTUNE_CACHE_DIR": str(root)} if root else {"FLASHINFER_WORKSPACE_BASE": str(tmp_path / "ws")}
        proc = start_poc(tree, **env)
        out, _ = proc.communicate(timeout=30)  # stderr (the progress bars) goes into stdout
        assert proc.returncode == 0, out
        outs.append(out)
    first, second, elsewhere = outs
    assert "Using FlashInfer managed autotune cache (root=flashinfer default)" in first
    assert first.count("[AutoTuner]: Tuning ") >= 3 and "Config cache hit" not in first
    assert len(list(store.glob("v2/*/entries/*.json"))) == 3 and list(store.glob("v2/*/manifest.json"))
    assert "[AutoTuner]: Tuning " not in second
    for op in ("fp4_gemm", "trtllm::fused_moe::gemm1", "trtllm::fused_moe::gemm2"):
        assert f"[Autotuner]: Config cache hit for {op} (runner=" in second and "source=managed cache)" in second
    assert f"ManagedAutotuneCache(env_dir='{store}/v2/" in second
    assert "[AutoTuner]: Tuning " in elsewhere and "Config cache hit" not in elsewhere
