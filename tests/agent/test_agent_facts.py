"""`facts`: the agent's description of a host, and the pure parsers behind it."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support import agent_harness as h

host_facts = h.collector("host_facts")
nvml_access = h.collector("nvml_access")

TOP_LEVEL = {"hostname", "boot_id", "uptime_s", "os", "kernel", "arch", "cpu", "memory_bytes", "dmi",
             "python", "journal_persistent", "docker", "nvml", "driver_version",
             "cuda_driver_version", "gpus", "nvidia_smi"}


def test_facts_on_a_host_without_nvml_has_every_field_and_says_why(tmp_path: Path) -> None:
    rc, lines, _ = h.run_agent(tmp_path, "facts")
    assert rc == 0 and len(lines) == 1
    facts = lines[0]
    assert facts["k"] == "facts" and TOP_LEVEL <= set(facts)
    assert facts["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert set(facts["os"]) == {"id", "version_id", "pretty_name"}
    assert set(facts["cpu"]) == {"model", "cores", "threads"} and facts["cpu"]["threads"] >= 1
    assert set(facts["dmi"]) == set(host_facts.DMI_FIELDS)
    assert facts["memory_bytes"] > 0 and isinstance(facts["journal_persistent"], bool)
    assert facts["nvml"].startswith("pynvml not importable") and facts["gpus"] == []


def test_facts_describe_each_gpu_through_nvml(tmp_path: Path) -> None:
    state = h.fake_gpu_state(tmp_path / "gpu.json", gpus=2)
    env = h.agent_env({"FAKE_PYNVML_STATE": str(state)}, fakes=True)
    rc, lines, _ = h.run_agent(tmp_path, "facts", env=env)
    facts = lines[0]
    assert facts["nvml"] == "ok" and facts["driver_version"] == "610.43.03"
    assert facts["cuda_driver_version"] == "13.3"
    assert facts["nvidia_smi"].endswith("fakes/bin/nvidia-smi")
    assert [gpu["index"] for gpu in facts["gpus"]] == [0, 1]
    gpu = facts["gpus"][0]
    assert gpu["name"] == "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    assert gpu["vbios"] == "98.02.81.00.07" and gpu["pci_bus_id"] == "00000000:01:00.0"
    assert gpu["memory_total_bytes"] == 97887 * 1024 * 1024
    assert gpu["power_limit_w"] == {"default": 600.0, "min": 150.0, "max": 600.0, "current": 600.0,
                                    "enforced": 600.0}
    assert gpu["max_clocks_mhz"] == {"graphics": 3090, "sm": 3090, "memory": 14001}
    assert gpu["persistence_mode"] is False and gpu["compute_mode"] == 0


def test_an_unsupported_nvml_call_leaves_one_null_with_a_note(tmp_path: Path) -> None:
    state = h.fake_gpu_state(tmp_path / "gpu.json", unsupported=["nvmlDeviceGetSerial"])
    env = h.agent_env({"FAKE_PYNVML_STATE": str(state)}, fakes=True)
    facts = h.run_agent(tmp_path, "facts", env=env)[1][0]
    assert facts["gpus"][0]["serial"] is None and facts["gpus"][0]["uuid"].startswith("GPU-")
    assert any(note.startswith("gpu0.serial: Not Supported") for note in facts["notes"])


def test_os_release_values_are_unquoted() -> None:
    text = 'PRETTY_NAME="Ubuntu 24.04.3 LTS"\nNAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\n# comment\n'
    assert host_facts.parse_os_release(text) == {"id": "ubuntu", "version_id": "24.04",
                                                 "pretty_name": "Ubuntu 24.04.3 LTS"}


def test_cpuinfo_counts_physical_cores_across_sockets_and_smt_threads() -> None:
    blocks = []
    for cpu, (physical, core) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)] * 2):
        blocks.append(f"processor\t: {cpu}\nmodel name\t: AMD Ryzen 9 9950X3D 16-Core Processor\n"
                      f"physical id\t: {physical}\ncore id\t\t: {core}\n")
    cpu = host_facts.parse_cpuinfo("\n".join(blocks), logical=None)
    assert cpu == {"model": "AMD Ryzen 9 9950X3D 16-Core Processor", "cores": 4, "threads": 8}


def test_meminfo_total_is_in_bytes() -> None:
    assert host_facts.parse_meminfo_total("MemTotal:       65536000 kB\nMemFree: 1 kB\n") == 65536000 * 1024


def test_journal_persistence_follows_storage_and_the_journal_dir() -> None:
    main = "[Journal]\n#Storage=auto\n"
    dropin = "[Journal]\nStorage=volatile\n"
    assert host_facts.journald_storage([main]) == "auto"
    assert host_facts.journald_storage([main, dropin]) == "volatile"
    assert host_facts.journal_persistent("auto", journal_dir_exists=True) is True
    assert host_facts.journal_persistent("auto", journal_dir_exists=False) is False
    assert host_facts.journal_persistent("volatile", journal_dir_exists=True) is False
    assert host_facts.journal_persistent("persistent", journal_dir_exists=False) is True


def test_cuda_driver_version_is_major_dot_minor() -> None:
    assert nvml_access.cuda_version_text(13030) == "13.3"
    assert nvml_access.cuda_version_text(12080) == "12.8"
    assert nvml_access.cuda_version_text(None) is None


def test_a_host_whose_python_has_no_pynvml_uses_the_binding_pushed_with_the_agent(tmp_path: Path) -> None:
    import subprocess

    from reprofleet.remote.agent import BUNDLED_NVML, load_bundle

    bundle = load_bundle()
    names = dict(bundle.files)
    assert BUNDLED_NVML in names and b"def nvmlInit" in names[BUNDLED_NVML]  # nvidia-ml-py's own module
    pushed = tmp_path / "agent"
    pushed.mkdir()
    for name, content in bundle.files:
        (pushed / name).write_bytes(content)
    done = subprocess.run([sys.executable, str(pushed / "agent.py"), "--state-dir", str(tmp_path / "s"), "facts"],
                          env=h.agent_env(), capture_output=True, text=True, timeout=60)  # the host's pynvml: none
    facts = h.parse_lines(done.stdout)[0]
    assert facts["nvml_binding"] == "bundled"
    # this controller has no NVIDIA driver: the bundled binding loaded, and NVML itself said why
    assert facts["nvml"].startswith("nvmlInit failed") and "not importable" not in facts["nvml"]


def test_the_hosts_own_pynvml_comes_first(tmp_path: Path) -> None:
    state = h.fake_gpu_state(tmp_path / "gpu.json", gpus=1)
    rc, lines, _ = h.run_agent(tmp_path, "facts", env=h.agent_env({"FAKE_PYNVML_STATE": str(state)}, fakes=True))
    assert lines[0]["nvml_binding"] == "host" and lines[0]["nvml"] == "ok"
