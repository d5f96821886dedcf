"""The simulated host's pynvml: every call the agent makes, with values that move with load."""

from __future__ import annotations

import os
import random
import time

import pytest

from reprofleet.sim.rfsim import gpu, hwio, telemetry
from reprofleet.sim.rfsim import nvml as pynvml


@pytest.fixture
def card(sim_host_tree, monkeypatch):
    tree = sim_host_tree()
    monkeypatch.setenv("RFSIM_ETC", str(tree.etc))
    pynvml.nvmlInit()
    yield tree, pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlShutdown()


def put_load(tree, level: float, started: float | None = None) -> None:
    hwio.write_json(tree.hw / "gpu0.load.json", {"pid": os.getpid(), "level": level, "memory_used_mib": 85160,
                                                 "started": started or time.time(), "phase": "cuda_graph_capture"})


def test_identity_and_limits_are_those_of_an_rtx_pro_6000_blackwell(card) -> None:
    _, h = card
    assert pynvml.nvmlDeviceGetCount() == 1
    assert pynvml.nvmlDeviceGetName(h) == "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    assert pynvml.nvmlDeviceGetVbiosVersion(h) == "98.02.81.00.07"
    assert pynvml.nvmlSystemGetDriverVersion() == "610.43.03"
    assert pynvml.nvmlSystemGetCudaDriverVersion() == 13030
    assert pynvml.nvmlDeviceGetUUID(h).startswith("GPU-") and pynvml.nvmlDeviceGetSerial(h).isdigit()
    assert pynvml.nvmlDeviceGetPciInfo(h).busId == "00000000:01:00.0"
    assert pynvml.nvmlDeviceGetMemoryInfo(h).total == 97887 * 1024 * 1024
    assert pynvml.nvmlDeviceGetPowerManagementDefaultLimit(h) == 600_000
    assert pynvml.nvmlDeviceGetPowerManagementLimitConstraints(h) == (150_000, 600_000)
    assert pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_GRAPHICS) == 3090
    assert pynvml.nvmlDeviceGetCurrPcieLinkWidth(h) == 16
    assert pynvml.nvmlDeviceGetPersistenceMode(h) == pynvml.NVML_FEATURE_DISABLED
    assert pynvml.nvmlDeviceGetComputeMode(h) == pynvml.NVML_COMPUTEMODE_DEFAULT


def test_an_idle_card_sits_in_p8_near_200_mhz_and_30_w(card) -> None:
    _, h = card
    assert 180 <= pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_GRAPHICS) <= 210
    assert 25_000 <= pynvml.nvmlDeviceGetPowerUsage(h) <= 35_000
    assert pynvml.nvmlDeviceGetPerformanceState(h) == 8
    assert pynvml.nvmlDeviceGetCurrentClocksEventReasons(h) == pynvml.nvmlClocksEventReasonGpuIdle
    assert pynvml.nvmlDeviceGetUtilizationRates(h).gpu == 0


def test_under_load_the_card_boosts_to_the_top_clock_draws_power_and_warms_up(card) -> None:
    tree, h = card
    put_load(tree, 0.9, started=time.time() - 30)
    assert 3050 <= pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_GRAPHICS) <= 3090
    assert 300_000 <= pynvml.nvmlDeviceGetPowerUsage(h) <= 600_000
    assert pynvml.nvmlDeviceGetPerformanceState(h) == pynvml.NVML_PSTATE_0
    assert pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU) > 60
    assert pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h) == 5
    assert pynvml.nvmlDeviceGetMemoryInfo(h).used == 85160 * 1024 * 1024


def test_a_clock_lock_caps_the_clock_and_reads_back_as_the_p0_range(card) -> None:
    tree, h = card
    gpu.update_settings(0, {"locked_graphics": [180, 2800]}, tree.hw)
    put_load(tree, 0.9)
    assert pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_GRAPHICS) <= 2800
    assert pynvml.nvmlDeviceGetMinMaxClockOfPState(h, pynvml.NVML_CLOCK_GRAPHICS, pynvml.NVML_PSTATE_0) == (180, 2800)
    reasons = pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)
    assert reasons & pynvml.nvmlClocksEventReasonApplicationsClocksSetting
    freqs = pynvml.nvmlDeviceGetCurrentClockFreqs(h)  # the second read of a lock, in the H200's format
    assert "nvclockmin=180, nvclockmax=2800," in freqs and freqs.startswith("nvclock=")
    gpu.update_settings(0, {"locked_graphics": None}, tree.hw)
    assert "nvclockmax=%d," % gpu.MAX_GRAPHICS_MHZ in pynvml.nvmlDeviceGetCurrentClockFreqs(h)


def test_a_power_limit_caps_power_lowers_the_clock_and_sets_the_sw_power_cap_reason(card) -> None:
    tree, h = card
    gpu.update_settings(0, {"power_limit_w": 350.0}, tree.hw)
    put_load(tree, 0.95)
    assert pynvml.nvmlDeviceGetPowerUsage(h) <= 350_000
    assert pynvml.nvmlDeviceGetPowerManagementLimit(h) == pynvml.nvmlDeviceGetEnforcedPowerLimit(h) == 350_000
    assert 2300 < pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_GRAPHICS) < 2800
    assert pynvml.nvmlDeviceGetCurrentClocksEventReasons(h) & pynvml.nvmlClocksEventReasonSwPowerCap


def test_a_load_whose_process_is_gone_counts_as_idle(card) -> None:
    tree, h = card
    hwio.write_json(tree.hw / "gpu0.load.json", {"pid": 2 ** 22 + 7, "level": 0.9, "started": time.time()})
    assert pynvml.nvmlDeviceGetPerformanceState(h) == 8


def test_application_clocks_read_back_and_default_to_the_maximum(card) -> None:
    tree, h = card
    assert pynvml.nvmlDeviceGetApplicationsClock(h, pynvml.NVML_CLOCK_GRAPHICS) == 3090
    gpu.update_settings(0, {"application_clocks": [14001, 2500]}, tree.hw)
    assert pynvml.nvmlDeviceGetApplicationsClock(h, pynvml.NVML_CLOCK_MEM) == 14001
    assert pynvml.nvmlDeviceGetApplicationsClock(h, pynvml.NVML_CLOCK_GRAPHICS) == 2500


def test_xid_events_arrive_through_an_event_set_and_time_out_otherwise(card) -> None:
    tree, h = card
    events = pynvml.nvmlEventSetCreate()
    pynvml.nvmlDeviceRegisterEvents(h, pynvml.nvmlEventTypeXidCriticalError, events)
    with pytest.raises(pynvml.NVMLError_Timeout):
        pynvml.nvmlEventSetWait_v2(events, 10)
    hwio.append_jsonl(tree.hw / "gpu0.xid.jsonl", {"xid": 79, "t": time.time()})
    event = pynvml.nvmlEventSetWait_v2(events, 1000)
    assert (event.eventType, event.eventData) == (pynvml.nvmlEventTypeXidCriticalError, 79)
    pynvml.nvmlEventSetFree(events)


def test_errors_are_nvml_errors_with_the_real_subclasses(card) -> None:
    _, h = card
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetMinMaxClockOfPState(h, pynvml.NVML_CLOCK_GRAPHICS, 8)
    with pytest.raises(pynvml.NVMLError) as caught:
        pynvml.nvmlDeviceGetHandleByIndex(3)
    assert caught.value.value == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert isinstance(pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT), pynvml.NVMLError_Timeout)


def test_calls_before_init_fail_as_uninitialized(sim_host_tree, monkeypatch) -> None:
    monkeypatch.setenv("RFSIM_ETC", str(sim_host_tree().etc))
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()


def test_the_power_model_is_monotonic_and_its_inverse_fits_the_limit() -> None:
    for level in (0.3, 0.6, 0.95):
        clock = telemetry.clock_for_power(350.0, level)
        assert telemetry.power_at(min(clock, 3090), level) <= 350.0 + 1e-6
    state = dict(gpu.initial_state("x"), power_limit_w=600.0)
    sample = telemetry.sample(state, {"level": 1.0, "started": 0.0}, 100.0, random.Random(1))
    assert 550 <= sample.power_w <= 600 and sample.pstate == 0
