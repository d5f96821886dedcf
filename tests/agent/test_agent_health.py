"""`health --gpu N`: the agent's three witnesses that the GPU is still there after a wedge.

The healthy replies are a real NVIDIA H200's (tests/fixtures/real-gpu/health/, captured
read-only with capture_health.sh beside them: its sysfs config bytes, nvidia-smi's answers);
the replies of a GPU gone off the bus are written from published reports
(tests/fixtures/agent/health/README.md) at that GPU's bus id.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from tests.support import agent_harness as h
from tests.support import paths

REAL = paths.FIXTURES / "real-gpu" / "health"
GONE = paths.FIXTURES / "agent" / "health"
REPLY_BIN = paths.FIXTURES / "agent" / "fake_smi_reply"
H200_BUS = "00000000:00:06.0"
H200_FUNCTION = "0000:00:06.0"
pci_config = h.collector("pci_config")


def _sysfs(tmp: Path, config: bytes | None = None, present: bool = True) -> Path:
    """The H200's sysfs PCI tree as captured; ``config`` replaces what its config space reads."""
    root = tmp / "sys"
    shutil.copytree(REAL / "sysfs", root)
    function = root / "bus" / "pci" / "devices" / H200_FUNCTION
    if not present:
        shutil.rmtree(function)
    elif config is not None:
        (function / "config").write_bytes(config)
    return root


def _env(tmp: Path, sysfs: Path, reply: Path, rc: int = 0, lost: bool = False, gpus: int = 1,
         bus: str = H200_BUS, **extra: str) -> dict[str, str]:
    state = h.fake_gpu_state(tmp / "gpu.json", gpus=gpus)
    data = json.loads(state.read_text())
    for gpu in data["gpus"]:
        gpu.update(name="NVIDIA H200", busId=bus, lost=lost)
    state.write_text(json.dumps(data))
    env = h.agent_env({"FAKE_PYNVML_STATE": str(state), "REPROFLEET_SYSFS": str(sysfs), "FAKE_SMI_REPLY": str(reply),
                       "FAKE_SMI_RC": str(rc), "FAKE_SMI_LOG": str(tmp / "smi.log"), **extra}, fakes=True)
    env["PATH"] = f"{REPLY_BIN}:{env['PATH']}"
    return env


def _health(tmp: Path, env: dict[str, str], *args: str) -> tuple[int, dict[str, Any]]:
    rc, lines, err = h.run_agent(tmp / "state", "health", *args, env=env)
    assert len(lines) == 1, err
    return rc, lines[0]


def _checks(line: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in line["checks"]}


def test_a_healthy_h200_passes_every_check_with_words(tmp_path: Path) -> None:
    env = _env(tmp_path, _sysfs(tmp_path), REAL / "nvidia-smi-query-bus-id.txt")
    rc, line = _health(tmp_path, env, "--gpu", "0", "--bus-id", H200_BUS, "--expect-gpus", "1")
    checks = _checks(line)
    assert rc == 0 and line["ok"] is True and line["lost"] is False and line["bus_id"] == H200_BUS
    assert [c["name"] for c in line["checks"]] == ["nvml", "pci", "nvidia_smi"]
    assert all(c["ok"] is True for c in line["checks"])
    assert "GPU 0 at 00000000:00:06.0 (NVIDIA H200, 1 GPU(s))" in checks["nvml"]["words"]
    assert checks["pci"]["words"] == "0000:00:06.0 answers config reads (rev a1, sysfs)"
    assert "00000000:00:06.0, NVIDIA H200" in checks["nvidia_smi"]["words"]
    asked = json.loads((tmp_path / "smi.log").read_text().splitlines()[0])
    assert asked == ["-i", H200_BUS, "--query-gpu=pci.bus_id,name", "--format=csv,noheader"]


def test_a_gpu_off_the_bus_fails_all_three_and_says_so(tmp_path: Path) -> None:
    env = _env(tmp_path, _sysfs(tmp_path, config=b"\xff" * 64), GONE / "nvidia-smi-gpu-is-lost.txt", rc=15, lost=True)
    rc, line = _health(tmp_path, env, "--gpu", "0", "--bus-id", H200_BUS)
    checks = _checks(line)
    assert rc == 1 and line["ok"] is False and line["lost"] is True
    assert all(c["ok"] is False and c["lost"] is True for c in line["checks"])
    assert checks["pci"]["short"] == "lspci rev ff"
    assert "reads all ones (lspci: rev ff): the GPU fell off the bus" in checks["pci"]["words"]
    assert checks["nvml"]["short"] == "NVML: GPU is lost"
    assert checks["nvidia_smi"]["short"] == "nvidia-smi exit 15"
    assert "the GPU has fallen off the bus or has otherwise become inaccessible" in checks["nvidia_smi"]["words"]
    assert "GPU is lost.  Reboot the system to recover this GPU" in checks["nvidia_smi"]["words"]


def test_a_gpu_not_enumerated_in_this_boot_is_missing_everywhere(tmp_path: Path) -> None:
    # nvidia-smi's answer for a GPU it does not have is the real H200's (`-i 7`, exit 6)
    env = _env(tmp_path, _sysfs(tmp_path, present=False), REAL / "nvidia-smi-query-index-7.txt", rc=6, gpus=0)
    rc, line = _health(tmp_path, env, "--gpu", "0", "--bus-id", H200_BUS, "--expect-gpus", "1")
    checks = _checks(line)
    assert rc == 1 and line["lost"] is True
    assert checks["nvml"]["words"] == "NVML lists 0 GPU(s), 1 before the wedge: a GPU is gone"
    assert checks["pci"]["short"] == "not on the PCI bus"
    assert checks["nvidia_smi"]["lost"] is True and "No devices were found" in checks["nvidia_smi"]["words"]


def test_a_gpu_whose_index_now_names_another_bus_id_is_gone(tmp_path: Path) -> None:
    """On a host of several GPUs, the one that fell off leaves its index to the next."""
    env = _env(tmp_path, _sysfs(tmp_path), REAL / "nvidia-smi-query-bus-id.txt", bus="00000000:41:00.0")
    rc, line = _health(tmp_path, env, "--gpu", "0", "--bus-id", H200_BUS)
    nvml = _checks(line)["nvml"]
    assert rc == 1 and nvml["ok"] is False and nvml["lost"] is True
    assert nvml["words"].startswith("NVML's GPU 0 is at 00000000:41:00.0, it was at 00000000:00:06.0")


def test_an_nvidia_smi_that_hangs_is_killed_within_its_bound(tmp_path: Path) -> None:
    env = _env(tmp_path, _sysfs(tmp_path), REAL / "nvidia-smi-query-bus-id.txt", FAKE_SMI_SLEEP="30")
    started = time.monotonic()
    rc, line = _health(tmp_path, env, "--gpu", "0", "--smi-timeout", "1")
    assert time.monotonic() - started < 15
    smi = _checks(line)["nvidia_smi"]
    assert rc == 1 and smi["ok"] is False and smi["words"] == "nvidia-smi did not answer within 1 s and was killed"
    assert _checks(line)["nvml"]["ok"] is True  # the bus id came from NVML when none was given


def test_without_a_pci_tree_lspci_is_read_and_rev_ff_fails(tmp_path: Path) -> None:
    bare = tmp_path / "bare-sys"
    bare.mkdir()
    env = _env(tmp_path, bare, REAL / "nvidia-smi-query-bus-id.txt", FAKE_LSPCI_REPLY=str(GONE / "lspci-rev-ff.txt"))
    rc, line = _health(tmp_path, env, "--gpu", "0", "--bus-id", H200_BUS)
    pci = _checks(line)["pci"]
    assert rc == 1 and pci["ok"] is False and pci["source"] == "lspci" and pci["short"] == "lspci rev ff"


def test_a_check_that_cannot_run_here_is_unknown_not_failed(tmp_path: Path) -> None:
    bare = tmp_path / "bare-sys"
    bare.mkdir()
    env = _env(tmp_path, bare, REAL / "nvidia-smi-query-bus-id.txt")
    (tmp_path / "nobin").mkdir()
    env["PATH"] = str(tmp_path / "nobin")  # neither lspci nor nvidia-smi
    rc, line = _health(tmp_path, env, "--gpu", "0")
    checks = _checks(line)
    assert checks["pci"]["ok"] is None and checks["nvidia_smi"]["ok"] is None
    assert rc == 0 and line["ok"] is True  # NVML saw it, nothing else said otherwise


def test_config_space_parsing_of_the_real_h200_and_of_all_ones() -> None:
    config = (REAL / "sysfs" / "bus" / "pci" / "devices" / H200_FUNCTION / "config").read_bytes()
    assert pci_config.parse_header(config) == {"vendor": 0x10DE, "device": 0x2335, "revision": 0xA1,
                                               "class": 0x030200, "answers": True}
    assert pci_config.parse_header(b"\xff" * 64)["answers"] is False
    assert pci_config.parse_header(b"\xde\x10") is None


def test_lspci_lines_and_bus_ids_are_read_as_sysfs_names_them() -> None:
    found = pci_config.parse_lspci((GONE / "lspci-rev-ff.txt").read_text())
    assert [(f["bdf"], f["answers"], f["class"]) for f in found] == [
        ("0000:00:06.0", False, 0x030200), ("0000:41:00.0", True, 0x030200)]
    assert pci_config.sysfs_name("00000000:00:06.0") == "0000:00:06.0"
    assert pci_config.sysfs_name("0000:41:00.0") == "0000:41:00.0"
    assert pci_config.sysfs_name("not-a-bus-id") is None
