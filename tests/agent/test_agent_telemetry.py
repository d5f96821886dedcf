"""Telemetry inside the supervisor: NVML samples, Xid events, tagged kernel lines, and the
per-attempt summary (a pure function, so the exit line can be checked against the stream)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from tests.support import agent_harness as h

summary = h.collector("telemetry_summary")
kernel_log = h.collector("kernel_log")

XID_RECORD = "3,812,523456789,-;NVRM: Xid (PCI:0000:01:00): 79, pid=1234, name=python3, GPU has fallen off the bus."


def run_with_fake_gpu(tmp_path: Path, script: str, *extra: str, **gpu: Any) -> List[Dict[str, Any]]:
    state = h.fake_gpu_state(tmp_path / "gpu.json", unsupported=gpu.pop("unsupported", []))
    card = json.loads(state.read_text())
    card["gpus"][0].update(gpu)
    state.write_text(json.dumps(card))
    (tmp_path / "kmsg").touch()
    env = h.agent_env({"FAKE_PYNVML_STATE": str(state)}, fakes=True)
    rc, lines, _ = h.run_agent(tmp_path / "state", "run", "--id", "tel", "--timeout", "20", "--sample-hz", "20",
                               "--kmsg", str(tmp_path / "kmsg"), *extra, "--", "sh", "-c", script, env=env)
    assert rc == 0
    return h.without_hb(lines)


def test_the_stream_carries_samples_xids_and_tagged_kernel_lines_and_the_exit_sums_them_up(tmp_path: Path) -> None:
    script = f"sleep 0.3; echo '{XID_RECORD}' >> {tmp_path / 'kmsg'}; sleep 0.4"
    events = run_with_fake_gpu(tmp_path, script, "--clock-threshold", "2800",
                               unsupported=["nvmlDeviceGetPcieReplayCounter"],
                               clocks={"0": 2950, "1": 2950, "2": 14001}, pendingXids=[43], eventReasons=0x4)
    samples = [e for e in events if e["k"] == "nvml" and "gfx_mhz" in e]
    assert len(samples) >= 5
    assert {"gfx_mhz", "sm_mhz", "mem_mhz", "power_w", "power_limit_w", "temp_c", "pstate", "event_reasons",
            "event_reason_names", "pcie_gen", "pcie_width", "mem_used_bytes", "util_gpu"} <= set(samples[0])
    assert "pcie_replay" not in samples[0] and samples[0]["event_reason_names"] == ["sw_power_cap"]
    notices = [e for e in events if e["k"] == "notice"]
    assert [n["detail"].split(":")[0] for n in notices] == ["pcie_replay"]  # once, not per sample
    assert [e["xid"] for e in events if e["k"] == "nvml" and "xid" in e] == [43]
    kmsg = [e for e in events if e["k"] == "kmsg"]
    assert kmsg == [dict(kmsg[0], line=XID_RECORD.split(";", 1)[1], tags=["xid", "nvrm"])]
    exit_line = events[-1]
    assert exit_line["k"] == "exit"
    expected = summary.summarize(samples, [43, 79], 2800.0, 1 / 20)
    assert exit_line["telemetry"] == expected
    assert expected["xids"] == [43, 79] and expected["gfx_mhz_peak"] == 2950.0
    stored_exit = json.loads((tmp_path / "state/attempts/tel/exit.json").read_text())
    assert stored_exit["telemetry"] == expected


def test_without_nvml_the_attempt_runs_with_one_notice_and_an_empty_summary(tmp_path: Path) -> None:
    rc, lines, _ = h.run_agent(tmp_path, "run", "--id", "nonvml", "--timeout", "10", "--kmsg", "",
                               "--", "sh", "-c", "echo ok; sleep 0.2")
    events = h.without_hb(lines)
    notices = [e for e in events if e["k"] == "notice"]
    assert len(notices) == 1 and notices[0]["what"] == "nvml"
    assert events[-1]["rc"] == 0 and events[-1]["telemetry"]["samples"] == 0
    assert events[-1]["telemetry"]["gfx_mhz_peak"] is None


def test_an_unreadable_kernel_log_is_one_notice_and_the_attempt_goes_on(tmp_path: Path) -> None:
    rc, lines, _ = h.run_agent(tmp_path, "run", "--id", "nokmsg", "--timeout", "10", "--sample-hz", "0",
                               "--kmsg", str(tmp_path / "missing"), "--", "echo", "ok")
    events = h.without_hb(lines)
    assert [e["what"] for e in events if e["k"] == "notice" and "unreadable" in e["detail"]] == ["kmsg"]
    assert events[-1]["rc"] == 0


def test_the_summary_counts_time_above_the_threshold_but_not_sampling_gaps() -> None:
    samples = [
        {"t": 0.0, "gfx_mhz": 2700, "power_w": 300.0, "temp_c": 60, "event_reason_names": []},
        {"t": 0.1, "gfx_mhz": 2900, "power_w": 450.0, "temp_c": 62, "event_reason_names": ["sw_power_cap"]},
        {"t": 0.2, "gfx_mhz": 3000, "power_w": 590.0, "temp_c": 65, "event_reason_names": ["sw_power_cap"]},
        {"t": 5.0, "gfx_mhz": 2805, "power_w": 400.0, "temp_c": 64, "event_reason_names": ["gpu_idle"]},
    ]
    result = summary.summarize(samples, [79, 79], threshold_mhz=2800, interval_s=0.1)
    assert result == {
        "samples": 4, "gfx_mhz_peak": 3000.0, "gfx_mhz_mean": 2851.2, "power_w_peak": 590.0, "temp_c_peak": 65.0,
        "clock_threshold_mhz": 2800, "seconds_above_threshold": 0.4,  # 0.1 + capped 0.2 + last 0.1
        "event_reasons_seen": ["gpu_idle", "sw_power_cap"], "xids": [79],
    }


def test_an_empty_attempt_summarizes_to_nulls() -> None:
    result = summary.summarize([], [], 2800, 0.1)
    assert result["samples"] == 0 and result["gfx_mhz_peak"] is None and result["seconds_above_threshold"] is None


def test_event_reason_bits_have_names() -> None:
    assert summary.reason_names(0x1 | 0x4 | 0x40) == ["gpu_idle", "sw_power_cap", "hw_thermal_slowdown"]
    assert summary.reason_names(0x800) == ["0x800"]


@pytest.mark.parametrize("message, tags", [
    ("NVRM: Xid (PCI:0000:01:00): 79, pid=1234, name=python3, GPU has fallen off the bus.", ["xid", "nvrm"]),
    ("NVRM: GPU at PCI:0000:01:00: GPU-3f1c2a9e-0000-4000-8000-000000000001", ["nvrm"]),
    ("pcieport 0000:00:01.1: AER: Uncorrected (Fatal) error received: 0000:01:00.0", ["aer"]),
    ("nvidia 0000:01:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)",
     ["aer"]),
    ("mce: [Hardware Error]: Machine check events logged", ["mce"]),
    ("INFO: task python3:4242 blocked for more than 122 seconds.", ["hung_task"]),
    ("watchdog: BUG: soft lockup - CPU#7 stuck for 26s! [python3:4242]", ["watchdog"]),
    ("rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:", ["watchdog"]),
    ("BUG: unable to handle page fault for address: ffffb5c0c1a3f000", ["oops"]),
    ("Kernel panic - not syncing: Hard LOCKUP", ["watchdog", "oops", "panic"]),
    ("nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  610.43.03", []),
    ("EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode.", []),
])
def test_the_kernel_line_tagger(message: str, tags: List[str]) -> None:
    assert kernel_log.tags_of(message) == tags


def test_kmsg_records_and_journal_lines_give_the_message() -> None:
    assert kernel_log.parse_kmsg_record("6,1234,98765432,-;usb 1-1: new device\n SUBSYSTEM=usb\n") == (
        6, 1234, "usb 1-1: new device")
    assert kernel_log.parse_kmsg_record("garbage without header") is None
    assert kernel_log.xid_of(XID_RECORD) == 79
    assert kernel_log.journal_message("1795970000.123456 ws01 kernel: NVRM: Xid (PCI:0000:01:00): 13, x") == (
        "NVRM: Xid (PCI:0000:01:00): 13, x")


def test_the_pcie_replay_counter_can_be_read_on_every_nth_sample_only_and_every_sample_by_default() -> None:
    from types import SimpleNamespace

    sampler_mod = h.collector("nvml_sampler")
    replay_reads: List[int] = []
    fake = SimpleNamespace(
        NVML_CLOCK_GRAPHICS=0, NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, NVML_TEMPERATURE_GPU=0,
        nvmlDeviceGetClockInfo=lambda h, c: 1980, nvmlDeviceGetPowerUsage=lambda h: 100000,
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 700000, nvmlDeviceGetTemperature=lambda h, s: 40,
        nvmlDeviceGetPerformanceState=lambda h: 0, nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0,
        nvmlDeviceGetCurrPcieLinkGeneration=lambda h: 5, nvmlDeviceGetCurrPcieLinkWidth=lambda h: 16,
        nvmlDeviceGetPcieReplayCounter=lambda h: replay_reads.append(1) or 0,
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=1), nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=0))

    def samples(**kwargs: Any) -> List[Dict[str, Any]]:
        lines: List[Dict[str, Any]] = []
        sampler = sampler_mod.NvmlSampler(0, 10.0, lambda kind, **f: lines.append(f) or f,
                                          sampler_mod.Notices(lambda *a, **k: None), **kwargs)
        fields = sampler_mod._fields(fake)
        for _ in range(20):
            sampler._take_sample(fake, None, fields)
        return lines

    assert all("pcie_replay" in s for s in samples()) and len(replay_reads) == 20  # default: every sample
    replay_reads.clear()
    decimated = samples(slow_every=10)
    assert [i for i, s in enumerate(decimated) if "pcie_replay" in s] == [0, 10] and len(replay_reads) == 2
    assert all("gfx_mhz" in s and "power_w" in s for s in decimated)  # the cheap fields every time
