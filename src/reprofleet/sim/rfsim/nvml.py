"""The fake NVML behind a simulated host's ``pynvml`` (nvidia-ml-py's API and names).

Implements the calls listed in collectors/PROTOCOL.md. Every call reads the GPU state file
afresh, so a setting changed by nvidia-smi or a load marked by the engine shows at once.
Power is in milliwatts, clocks in MHz, memory in bytes, as in NVML.

Host-side module: standard library only.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Tuple

from . import gpu, hwio, telemetry
from .nvml_errors import (  # noqa: F401  (re-exported: pynvml's names)
    NVMLError,
    NVML_SUCCESS,
    NVML_ERROR_UNINITIALIZED,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_NOT_FOUND,
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_TIMEOUT,
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_UNKNOWN,
    NVMLError_Uninitialized,
    NVMLError_InvalidArgument,
    NVMLError_NotSupported,
    NVMLError_NoPermission,
    NVMLError_NotFound,
    NVMLError_DriverNotLoaded,
    NVMLError_Timeout,
    NVMLError_GpuIsLost,
    NVMLError_Unknown,
)


NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_CLOCK_VIDEO = 3
NVML_TEMPERATURE_GPU = 0
NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
NVML_COMPUTEMODE_DEFAULT = 0
NVML_PSTATE_0 = 0
NVML_PSTATE_8 = 8
NVML_PSTATE_UNKNOWN = 32

nvmlEventTypeXidCriticalError = 0x0000000000000008
nvmlEventTypeNone = 0
nvmlClocksEventReasonNone = 0
nvmlClocksEventReasonGpuIdle = 0x1
nvmlClocksEventReasonApplicationsClocksSetting = 0x2
nvmlClocksEventReasonUserDefinedClocks = 0x2
nvmlClocksEventReasonSwPowerCap = 0x4
nvmlClocksEventReasonHwSlowdown = 0x8
nvmlClocksEventReasonSyncBoost = 0x10
nvmlClocksEventReasonSwThermalSlowdown = 0x20
nvmlClocksEventReasonHwThermalSlowdown = 0x40
nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x80
nvmlClocksEventReasonDisplayClockSetting = 0x100
nvmlClocksThrottleReasonGpuIdle = nvmlClocksEventReasonGpuIdle
nvmlClocksThrottleReasonApplicationsClocksSetting = nvmlClocksEventReasonApplicationsClocksSetting
nvmlClocksThrottleReasonSwPowerCap = nvmlClocksEventReasonSwPowerCap
nvmlClocksThrottleReasonHwSlowdown = nvmlClocksEventReasonHwSlowdown

_initialized = 0


class _Struct:
    """Attribute bag standing in for NVML's ctypes structures."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__dict__})"


class c_nvmlDevice_t:
    """A device handle: just the index of the card's state file."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"c_nvmlDevice_t(index={self.index})"


def _check() -> None:
    if _initialized <= 0:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)


def _state(handle: c_nvmlDevice_t) -> Dict[str, Any]:
    """The card's state; a card off the bus answers every call with NVML_ERROR_GPU_IS_LOST
    ("The GPU has fallen off the bus or has otherwise become inaccessible", nvmlReturn_t)."""
    _check()
    try:
        state = gpu.read_state(handle.index)
    except FileNotFoundError:
        raise NVMLError(NVML_ERROR_GPU_IS_LOST) from None
    if state.get("lost"):
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)
    return state


def _now(handle: c_nvmlDevice_t) -> telemetry.Sample:
    return telemetry.sample(_state(handle), gpu.read_load(handle.index), time.time())


def nvmlInit() -> None:
    global _initialized
    if gpu.gpu_count() == 0:
        raise NVMLError(NVML_ERROR_DRIVER_NOT_LOADED)
    _initialized += 1


nvmlInitWithFlags = lambda flags=0: nvmlInit()  # noqa: E731  (same signature as the real one)


def nvmlShutdown() -> None:
    global _initialized
    _check()
    _initialized -= 1


def nvmlSystemGetDriverVersion() -> str:
    _check()
    return gpu.DRIVER


def nvmlSystemGetCudaDriverVersion() -> int:
    _check()
    return gpu.CUDA_DRIVER_VERSION


nvmlSystemGetCudaDriverVersion_v2 = nvmlSystemGetCudaDriverVersion


def nvmlDeviceGetCount() -> int:
    _check()
    return gpu.gpu_count()


def nvmlDeviceGetHandleByIndex(index: int) -> c_nvmlDevice_t:
    """A lost card still counts in nvmlDeviceGetCount, but its handle is refused with
    NVML_ERROR_GPU_IS_LOST (what pynvml users report: rossumai/nvgpu#6); an index past the
    count is NVML_ERROR_INVALID_ARGUMENT (a real H200, tests/fixtures/real-gpu/health/)."""
    _check()
    if not 0 <= int(index) < gpu.gpu_count():
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    if gpu.is_lost(int(index)):
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)
    return c_nvmlDevice_t(index=int(index))


def nvmlDeviceGetName(handle: c_nvmlDevice_t) -> str:
    _state(handle)
    return gpu.NAME


def nvmlDeviceGetUUID(handle: c_nvmlDevice_t) -> str:
    return str(_state(handle)["uuid"])


def nvmlDeviceGetSerial(handle: c_nvmlDevice_t) -> str:
    return str(_state(handle)["serial"])


def nvmlDeviceGetVbiosVersion(handle: c_nvmlDevice_t) -> str:
    _state(handle)
    return gpu.VBIOS


def nvmlDeviceGetPciInfo(handle: c_nvmlDevice_t) -> _Struct:
    bus = str(_state(handle)["pci_bus_id"])
    return _Struct(busId=bus, busIdLegacy=bus[4:], domain=0, bus=int(bus.split(":")[1], 16),
                   device=0, pciDeviceId=0x2BB110DE, pciSubSystemId=0x204B10DE)


nvmlDeviceGetPciInfo_v3 = nvmlDeviceGetPciInfo


def nvmlDeviceGetMemoryInfo(handle: c_nvmlDevice_t, version: Optional[int] = None) -> _Struct:
    used = _now(handle).memory_used_mib * 1024 * 1024
    total = gpu.MEMORY_TOTAL_MIB * 1024 * 1024
    return _Struct(total=total, used=used, free=total - used, reserved=0)


def nvmlDeviceGetPowerManagementDefaultLimit(handle: c_nvmlDevice_t) -> int:
    _state(handle)
    return int(gpu.POWER_DEFAULT_W * 1000)


def nvmlDeviceGetPowerManagementLimitConstraints(handle: c_nvmlDevice_t) -> Tuple[int, int]:
    _state(handle)
    return int(gpu.POWER_MIN_W * 1000), int(gpu.POWER_MAX_W * 1000)


def nvmlDeviceGetPowerManagementLimit(handle: c_nvmlDevice_t) -> int:
    return int(float(_state(handle)["power_limit_w"]) * 1000)


nvmlDeviceGetEnforcedPowerLimit = nvmlDeviceGetPowerManagementLimit


def nvmlDeviceGetPowerUsage(handle: c_nvmlDevice_t) -> int:
    return int(_now(handle).power_w * 1000)


def nvmlDeviceGetMaxClockInfo(handle: c_nvmlDevice_t, clock_type: int) -> int:
    _state(handle)
    return gpu.MAX_MEMORY_MHZ if clock_type == NVML_CLOCK_MEM else gpu.MAX_GRAPHICS_MHZ


def nvmlDeviceGetClockInfo(handle: c_nvmlDevice_t, clock_type: int) -> int:
    now = _now(handle)
    return {NVML_CLOCK_GRAPHICS: now.graphics_mhz, NVML_CLOCK_SM: now.sm_mhz,
            NVML_CLOCK_MEM: now.memory_mhz}.get(clock_type, now.graphics_mhz)


def nvmlDeviceGetMinMaxClockOfPState(handle: c_nvmlDevice_t, clock_type: int, pstate: int) -> Tuple[int, int]:
    state = _state(handle)
    if pstate != NVML_PSTATE_0:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    if clock_type == NVML_CLOCK_MEM:
        locked = state.get("locked_memory")
        return (int(locked[0]), int(locked[1])) if locked else (gpu.MIN_MEMORY_MHZ, gpu.MAX_MEMORY_MHZ)
    locked = state.get("locked_graphics")
    return (int(locked[0]), int(locked[1])) if locked else (gpu.MIN_GRAPHICS_MHZ, gpu.MAX_GRAPHICS_MHZ)


def nvmlDeviceGetCurrentClockFreqs(handle: c_nvmlDevice_t) -> str:
    """The driver's clock string in the format an H200 gave it (driver 580.159.04:
    ``nvclock=345, nvclockmin=345, nvclockmax=1980, nvclockeditable=0, memclock=3201, ...``).
    The simulated card reports its lock here as it does in the P0 range: whether a real
    card does is what the controller's two-read rule guards against."""
    state = _state(handle)
    gfx = state.get("locked_graphics") or (gpu.MIN_GRAPHICS_MHZ, gpu.MAX_GRAPHICS_MHZ)
    mem = state.get("locked_memory") or (gpu.MIN_MEMORY_MHZ, gpu.MAX_MEMORY_MHZ)
    now_gfx = nvmlDeviceGetClockInfo(handle, NVML_CLOCK_GRAPHICS)
    now_mem = nvmlDeviceGetClockInfo(handle, NVML_CLOCK_MEM)
    return (f"nvclock={now_gfx}, nvclockmin={int(gfx[0])}, nvclockmax={int(gfx[1])}, nvclockeditable=0, "
            f"memclock={now_mem}, memclockmin={int(mem[0])}, memclockmax={int(mem[1])}, memclockeditable=0")


def nvmlDeviceGetApplicationsClock(handle: c_nvmlDevice_t, clock_type: int) -> int:
    clocks = _state(handle).get("application_clocks") or [gpu.MAX_MEMORY_MHZ, gpu.MAX_GRAPHICS_MHZ]
    return int(clocks[0]) if clock_type == NVML_CLOCK_MEM else int(clocks[1])


def nvmlDeviceGetDefaultApplicationsClock(handle: c_nvmlDevice_t, clock_type: int) -> int:
    _state(handle)
    return gpu.MAX_MEMORY_MHZ if clock_type == NVML_CLOCK_MEM else gpu.MAX_GRAPHICS_MHZ


def nvmlDeviceGetPersistenceMode(handle: c_nvmlDevice_t) -> int:
    return NVML_FEATURE_ENABLED if _state(handle).get("persistence") else NVML_FEATURE_DISABLED


def nvmlDeviceGetComputeMode(handle: c_nvmlDevice_t) -> int:
    return int(_state(handle).get("compute_mode", 0))


def nvmlDeviceGetTemperature(handle: c_nvmlDevice_t, sensor: int) -> int:
    if sensor != NVML_TEMPERATURE_GPU:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return _now(handle).temperature_c


def nvmlDeviceGetPerformanceState(handle: c_nvmlDevice_t) -> int:
    return _now(handle).pstate


def nvmlDeviceGetCurrentClocksEventReasons(handle: c_nvmlDevice_t) -> int:
    return _now(handle).event_reasons


nvmlDeviceGetCurrentClocksThrottleReasons = nvmlDeviceGetCurrentClocksEventReasons


def nvmlDeviceGetCurrPcieLinkGeneration(handle: c_nvmlDevice_t) -> int:
    return _now(handle).pcie_gen


def nvmlDeviceGetCurrPcieLinkWidth(handle: c_nvmlDevice_t) -> int:
    _state(handle)
    return gpu.PCIE_WIDTH


def nvmlDeviceGetMaxPcieLinkGeneration(handle: c_nvmlDevice_t) -> int:
    _state(handle)
    return gpu.PCIE_GEN_MAX


def nvmlDeviceGetPcieReplayCounter(handle: c_nvmlDevice_t) -> int:
    return int(_state(handle).get("pcie_replay", 0))


def nvmlDeviceGetUtilizationRates(handle: c_nvmlDevice_t) -> _Struct:
    now = _now(handle)
    return _Struct(gpu=now.utilization, memory=max(0, now.utilization - 20))


class _EventSet:
    """Registered devices -> how many Xid events of each were already delivered."""

    def __init__(self) -> None:
        self.devices: Dict[int, int] = {}
        self.freed = False


def nvmlEventSetCreate() -> _EventSet:
    _check()
    return _EventSet()


def nvmlDeviceRegisterEvents(handle: c_nvmlDevice_t, event_types: int, event_set: _EventSet) -> None:
    _state(handle)
    if not event_types & nvmlEventTypeXidCriticalError:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    event_set.devices[handle.index] = len(gpu.xid_events(handle.index))


def nvmlEventSetWait_v2(event_set: _EventSet, timeout_ms: int) -> _Struct:
    """The next Xid since registration, or NVMLError_Timeout after ``timeout_ms``."""
    _check()
    deadline = time.monotonic() + max(0, timeout_ms) / 1000.0
    while True:
        for index, seen in event_set.devices.items():
            events: List[Dict[str, Any]] = gpu.xid_events(index)
            if len(events) > seen:
                event_set.devices[index] = seen + 1
                return _Struct(device=c_nvmlDevice_t(index=index), eventType=nvmlEventTypeXidCriticalError,
                               eventData=int(events[seen].get("xid", 0)), gpuInstanceId=0xFFFFFFFF,
                               computeInstanceId=0xFFFFFFFF)
        if time.monotonic() >= deadline:
            raise NVMLError(NVML_ERROR_TIMEOUT)
        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))


nvmlEventSetWait = nvmlEventSetWait_v2


def nvmlEventSetFree(event_set: _EventSet) -> None:
    event_set.freed = True


def hw_available() -> bool:
    return hwio.hw_dir().is_dir()
