"""NVML's error codes and exception classes, as nvidia-ml-py defines them.

``NVMLError(code)`` builds the subclass for that code (``NVMLError_Timeout`` ...), so that
code written against the real pynvml catches the same exceptions here.

Host-side module: standard library only.
"""

from __future__ import annotations

from typing import Dict

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999

_ERROR_NAMES = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_TIMEOUT: "Timeout",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}


class NVMLError(Exception):
    """As in nvidia-ml-py: ``NVMLError(code)`` builds the subclass for that code."""

    _subclasses: Dict[int, type] = {}

    def __new__(cls, value: int) -> "NVMLError":
        target = NVMLError._subclasses.get(value, cls) if cls is NVMLError else cls
        return Exception.__new__(target)

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _ERROR_NAMES.get(self.value, f"Unknown Error ({self.value})")


def _subclass(name: str, code: int) -> type:
    cls = type(f"NVMLError_{name}", (NVMLError,), {})
    NVMLError._subclasses[code] = cls
    return cls


NVMLError_Uninitialized = _subclass("Uninitialized", NVML_ERROR_UNINITIALIZED)
NVMLError_InvalidArgument = _subclass("InvalidArgument", NVML_ERROR_INVALID_ARGUMENT)
NVMLError_NotSupported = _subclass("NotSupported", NVML_ERROR_NOT_SUPPORTED)
NVMLError_NoPermission = _subclass("NoPermission", NVML_ERROR_NO_PERMISSION)
NVMLError_NotFound = _subclass("NotFound", NVML_ERROR_NOT_FOUND)
NVMLError_DriverNotLoaded = _subclass("DriverNotLoaded", NVML_ERROR_DRIVER_NOT_LOADED)
NVMLError_Timeout = _subclass("Timeout", NVML_ERROR_TIMEOUT)
NVMLError_GpuIsLost = _subclass("GpuIsLost", NVML_ERROR_GPU_IS_LOST)
NVMLError_Unknown = _subclass("Unknown", NVML_ERROR_UNKNOWN)
