"""The GPU part of `facts`, from NVML: driver, CUDA, and one entry per GPU."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import nvml_access as nv


def collect(notes: List[str]) -> Dict[str, Any]:
    pynvml, reason = nv.load()
    if pynvml is None:
        return {"nvml": reason, "nvml_binding": nv.binding_name(), "driver_version": None,
                "cuda_driver_version": None, "gpus": []}
    try:
        driver, why = nv.attempt(lambda: nv.text(pynvml.nvmlSystemGetDriverVersion()))
        _note(notes, "driver_version", why)
        cuda, why = nv.attempt(pynvml.nvmlSystemGetCudaDriverVersion)
        _note(notes, "cuda_driver_version", why)
        count, why = nv.attempt(pynvml.nvmlDeviceGetCount)
        _note(notes, "gpus", why)
        gpus = [_gpu_or_error(pynvml, index, notes) for index in range(count or 0)]
        return {"nvml": "ok", "nvml_binding": nv.binding_name(), "driver_version": driver,
                "cuda_driver_version": nv.cuda_version_text(cuda), "gpus": gpus}
    finally:
        nv.release(pynvml)


def _gpu_or_error(pynvml: Any, index: int, notes: List[str]) -> Dict[str, Any]:
    try:
        return gpu_facts(pynvml, index, notes)
    except Exception as exc:  # no handle for this GPU (fallen off the bus?): say so, go on
        notes.append("gpu%d: %s" % (index, nv.describe(exc)))
        return {"index": index, "error": nv.describe(exc)}


def _note(notes: List[str], name: str, reason: Optional[str]) -> None:
    if reason:
        notes.append("%s: %s" % (name, reason))


def gpu_facts(pynvml: Any, index: int, notes: List[str]) -> Dict[str, Any]:
    """One GPU's identity and limits; a value NVML cannot give is null with a note."""
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)

    def read(name: str, call: Any, *args: Any) -> Any:
        value, reason = nv.attempt(lambda: call(handle, *args))
        _note(notes, "gpu%d.%s" % (index, name), reason)
        return value

    pci = read("pci_bus_id", pynvml.nvmlDeviceGetPciInfo)
    memory = read("memory_total_bytes", pynvml.nvmlDeviceGetMemoryInfo)
    constraints = read("power_limit_w.range", pynvml.nvmlDeviceGetPowerManagementLimitConstraints)
    low, high = (constraints[0], constraints[1]) if constraints else (None, None)
    return {
        "index": index,
        "name": nv.text(read("name", pynvml.nvmlDeviceGetName)),
        "uuid": nv.text(read("uuid", pynvml.nvmlDeviceGetUUID)),
        "serial": nv.text(read("serial", pynvml.nvmlDeviceGetSerial)),
        "vbios": nv.text(read("vbios", pynvml.nvmlDeviceGetVbiosVersion)),
        "pci_bus_id": nv.text(getattr(pci, "busId", None)),
        "memory_total_bytes": getattr(memory, "total", None),
        "power_limit_w": {
            "default": nv.mw_to_w(read("power_limit_w.default", pynvml.nvmlDeviceGetPowerManagementDefaultLimit)),
            "min": nv.mw_to_w(low),
            "max": nv.mw_to_w(high),
            "current": nv.mw_to_w(read("power_limit_w.current", pynvml.nvmlDeviceGetPowerManagementLimit)),
            "enforced": nv.mw_to_w(read("power_limit_w.enforced", pynvml.nvmlDeviceGetEnforcedPowerLimit)),
        },
        "max_clocks_mhz": {
            "graphics": read("max_clocks.graphics", pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_GRAPHICS),
            "sm": read("max_clocks.sm", pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_SM),
            "memory": read("max_clocks.memory", pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_MEM),
        },
        "persistence_mode": _flag(read("persistence_mode", pynvml.nvmlDeviceGetPersistenceMode)),
        "compute_mode": read("compute_mode", pynvml.nvmlDeviceGetComputeMode),
    }


def _flag(value: Any) -> Optional[bool]:
    return bool(value) if value is not None else None
