"""A simulated GPU that fell off the bus, through the host's own tools: its sysfs config
space, its lspci, its NVML and its nvidia-smi say what real ones say, and the agent's
``health`` (collectors/gpu_health.py) reads them as it reads a real host."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from reprofleet.sim import SimHostSpec
from reprofleet.sim.rfsim import gpu, sysfs
from tests.support import paths

AGENT = paths.REPO / "collectors" / "agent.py"
LOST_SMI = ("Unable to determine the device handle for GPU 0000:01:00.0: GPU is lost.  "
            "Reboot the system to recover this GPU")
QUERY = ["--query-gpu=pci.bus_id,name", "--format=csv,noheader"]


def _booted(tree: Any, lost: bool = False, watchdog: bool = False) -> Any:
    if lost:
        gpu.update_settings(0, {"lost": True}, tree.hw)
    sysfs.write_boot(tree.hw, watchdog)
    return tree


def _agent(tree: Any, *args: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(["/usr/bin/python3", str(AGENT), "--state-dir", str(tree.root / "state"), *args],
                          env=tree.env(REPROFLEET_SYSFS=str(tree.hw / "sys")), capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, check=False)
    return done.returncode, json.loads(done.stdout.splitlines()[0])


def test_a_healthy_simulated_gpu_passes_the_agents_health(sim_host_tree) -> None:
    tree = _booted(sim_host_tree())
    rc, line = _agent(tree, "health", "--gpu", "0", "--bus-id", "00000000:01:00.0", "--expect-gpus", "1")
    assert rc == 0 and line["ok"] and [c["ok"] for c in line["checks"]] == [True, True, True]
    assert tree.run(["lspci", "-D", "-n", "-d", "10de:"]).stdout.splitlines() == [
        "0000:01:00.0 0300: 10de:2bb1 (rev a1)", "0000:01:00.1 0403: 10de:22e8 (rev a1)"]
    assert tree.run(["nvidia-smi", "-i", "0", *QUERY]).stdout.strip().startswith("00000000:01:00.0, NVIDIA RTX PRO")


def test_a_simulated_gpu_off_the_bus_reads_as_a_real_one_does(sim_host_tree) -> None:
    tree = _booted(sim_host_tree(), lost=True)
    config = (sysfs.devices(tree.hw) / "0000:01:00.0" / "config").read_bytes()
    assert config == b"\xff" * 256  # every function of the card: it does not answer
    assert (sysfs.devices(tree.hw) / "0000:01:00.0" / "vendor").read_text() == "0x10de\n"  # the kernel's cache
    assert tree.run(["lspci", "-D", "-n", "-d", "10de:"]).stdout.splitlines() == [
        "0000:01:00.0 0300: 10de:2bb1 (rev ff)", "0000:01:00.1 0403: 10de:22e8 (rev ff)"]
    smi = tree.run(["nvidia-smi", "-i", "0", *QUERY])
    assert (smi.returncode, smi.stdout.strip()) == (15, LOST_SMI)
    assert tree.run(["nvidia-smi", "-pm", "1"]).returncode == 15  # a setter too: the card is not there
    nvml = tree.run(["python3", "-c", "import pynvml as p; p.nvmlInit(); print(p.nvmlDeviceGetCount())\n"
                     "try:\n    p.nvmlDeviceGetHandleByIndex(0)\nexcept p.NVMLError as e:\n"
                     "    print(type(e).__name__, e.value, e)"])
    assert nvml.stdout.splitlines() == ["1", "NVMLError_GpuIsLost 15 GPU is lost"]
    rc, line = _agent(tree, "health", "--gpu", "0", "--bus-id", "00000000:01:00.0", "--expect-gpus", "1")
    assert rc == 1 and line["lost"] is True
    assert [(c["name"], c["short"]) for c in line["checks"]] == [
        ("nvml", "NVML: GPU is lost"), ("pci", "lspci rev ff"), ("nvidia_smi", "nvidia-smi exit 15")]


def test_the_facts_of_a_simulated_host_say_whether_it_can_reset_itself(sim_host_tree) -> None:
    for watchdog in (False, True):
        tree = _booted(sim_host_tree(), watchdog=watchdog)
        rc, facts = _agent(tree, "facts")
        assert facts["watchdog"]["armed"] is watchdog and facts["kdump_loaded"] is False
        if watchdog:
            assert facts["watchdog"]["why"] == "watchdog0 (iTCO_wdt) is active, timeout 30 s"
    lost = _booted(sim_host_tree(), lost=True)
    assert _agent(lost, "facts")[1]["gpus"] == [{"index": 0, "error": "GPU is lost (NVMLError_GpuIsLost)"}]


@pytest.mark.parametrize("reboots", [{"p_reboot": 0.1, "p_wedge": 0.3}, {"script": ("clean", "reboot")}])
def test_a_host_that_resets_itself_needs_a_way_to(reboots: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="hardware_watchdog: true"):
        SimHostSpec("rb", **reboots)
    assert SimHostSpec("rb", hardware_watchdog=True, **reboots).hardware_watchdog
