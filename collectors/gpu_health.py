"""`health --gpu N`: is the GPU still there after a wedge and a power cycle?

A wedge can take the GPU off the bus, and an AC cycle does not always bring it back. A host
whose GPU is gone still boots, answers SSH and runs the agent, so without this check it
rejoins the campaign and its next attempts fail as errors that look like the bug's. Three
independent witnesses, each with its result in words:

* ``nvml``: NVML lists the GPU at this index (as many GPUs as before the wedge, at the same
  bus id), hands out its handle and answers a live read. A GPU that fell off makes
  nvmlDeviceGetHandleByIndex fail with NVML_ERROR_GPU_IS_LOST (15, "The GPU has fallen off
  the bus or has otherwise become inaccessible", NVML's nvmlReturn_t; pynvml raises
  NVMLError_GpuIsLost, e.g. rossumai/nvgpu#6); one that was not enumerated in this boot is
  simply missing, and the indices of the others move up.
* ``pci``: the function at that bus id answers config reads (pci_config.py: all ones is
  ``lspci``'s ``rev ff``), or is absent.
* ``nvidia_smi``: ``nvidia-smi -i <bus id> --query-gpu=...`` answers within a bound. A lost
  GPU makes it print "Unable to determine the device handle for GPU 0000:03:00.0: GPU is
  lost.  Reboot the system to recover this GPU" (AlexeyAB/darknet#86, marian-nmt/marian#251)
  and exit 15 (its man page: "The GPU has fallen off the bus or has otherwise become
  inaccessible"); a GPU stuck in the driver makes it hang, which is why it is bounded and
  killed, and a kill that does not end it (uninterruptible sleep) is reported, not waited on.

Each check is ``ok`` true (passed), false (evidence the GPU cannot be used) or null (could not
be checked here: no NVML binding, no PCI tree, no nvidia-smi); ``lost`` marks evidence that
the GPU itself is gone (off the bus, not enumerated, NVML_ERROR_GPU_IS_LOST).

Host-side module: standard library only (plus pynvml through nvml_access).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from typing import Any, Dict, List, Optional, Tuple

import attempt_state as state
import nvml_access as nv
import pci_config

CHECKS = ("nvml", "pci", "nvidia_smi")
SMI_TIMEOUT_S = 20.0
SMI_KILL_WAIT_S = 5.0
SMI_QUERY = "--query-gpu=pci.bus_id,name"
NVML_LOST_CODES = (15, 6)  # NVML_ERROR_GPU_IS_LOST, NVML_ERROR_NOT_FOUND
# nvidia-smi(1), RETURN VALUE: what each exit status means
SMI_EXIT_MEANINGS = {
    2: "a supplied argument or flag is invalid",
    3: "the requested operation is not available on target device",
    4: "the current user does not have permission to access this device or perform this operation",
    6: "a query to find an object was unsuccessful",
    8: "a device's external power cables are not properly attached",
    9: "NVIDIA driver is not loaded",
    10: "NVIDIA Kernel detected an interrupt issue with a GPU",
    12: "NVML Shared Library couldn't be found or loaded",
    13: "local version of NVML doesn't implement this function",
    14: "infoROM is corrupted",
    15: "the GPU has fallen off the bus or has otherwise become inaccessible",
    255: "other error or internal driver error occurred",
}
SMI_LOST_EXITS = (6, 15)
SMI_LOST_WORDS = ("GPU is lost", "No devices were found", "fallen off the bus")


def _check(name: str, ok: Optional[bool], words: str, short: str = "", lost: bool = False,
           **details: Any) -> Dict[str, Any]:
    return {"name": name, "ok": ok, "lost": lost, "words": words, "short": short or words, **details}


def _said(exc: BaseException) -> str:
    """NVML's own words for an error (``GPU is lost``), for the short summary."""
    return str(exc) or type(exc).__name__


def _nvml_lost(exc: BaseException) -> bool:
    return getattr(exc, "value", None) in NVML_LOST_CODES or "GPU is lost" in str(exc)


def check_nvml(pynvml: Any, index: int, bus_id: Optional[str], expect_gpus: Optional[int]) -> Dict[str, Any]:
    """NVML sees the GPU at ``index`` (at ``bus_id`` when known), among as many as before."""
    try:
        count = int(pynvml.nvmlDeviceGetCount())
    except Exception as exc:
        return _check("nvml", False, "nvmlDeviceGetCount failed: %s" % nv.describe(exc),
                      "NVML: %s" % _said(exc), lost=_nvml_lost(exc))
    if expect_gpus is not None and count < expect_gpus:
        return _check("nvml", False, "NVML lists %d GPU(s), %d before the wedge: a GPU is gone" % (count, expect_gpus),
                      "NVML: %d of %d GPUs" % (count, expect_gpus), lost=True, count=count)
    if index >= count:
        return _check("nvml", False, "NVML lists %d GPU(s): none at index %d" % (count, index),
                      "NVML: no GPU %d" % index, lost=True, count=count)
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        found = nv.text(pynvml.nvmlDeviceGetPciInfo(handle).busId)
    except Exception as exc:
        return _check("nvml", False, "nvmlDeviceGetHandleByIndex(%d): %s" % (index, nv.describe(exc)),
                      "NVML: %s" % _said(exc), lost=_nvml_lost(exc), count=count)
    if bus_id and found and pci_config.sysfs_name(found) != pci_config.sysfs_name(bus_id):
        return _check("nvml", False, "NVML's GPU %d is at %s, it was at %s before the wedge: the GPU at %s is gone"
                      % (index, found, bus_id, bus_id), "NVML: no GPU at %s" % bus_id, lost=True, count=count,
                      bus_id=found)
    failed = _live_read(pynvml, handle)
    if failed is not None:
        return _check("nvml", False, "NVML has GPU %d at %s but cannot read it: %s" % (index, found, nv.describe(failed)),
                      "NVML: %s" % _said(failed), lost=_nvml_lost(failed), count=count, bus_id=found)
    name = nv.text(nv.attempt(lambda: pynvml.nvmlDeviceGetName(handle))[0]) or "a GPU"
    return _check("nvml", True, "NVML sees GPU %d at %s (%s, %d GPU(s))" % (index, found, name, count),
                  "NVML ok", count=count, bus_id=found)


def _live_read(pynvml: Any, handle: Any) -> Optional[BaseException]:
    """The error of a read that asks the card itself (its temperature), None when it answered
    or the card does not report it."""
    try:
        pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
    except Exception as exc:
        return exc if _nvml_lost(exc) else None
    return None


def check_pci(bus_id: Optional[str]) -> Dict[str, Any]:
    """The GPU's function answers config reads (no ``rev ff``), or every NVIDIA GPU does when
    the bus id is unknown."""
    functions, source = pci_config.nvidia_functions()
    if functions is None:
        return _check("pci", None, "cannot read the PCI bus: %s" % source, "PCI unknown")
    gone = [f for f in functions if f.get("answers") is False]
    gpus = [f for f in functions if pci_config.is_gpu(f)]
    target = pci_config.sysfs_name(bus_id) if bus_id else None
    if target is not None:
        mine = [f for f in functions if f["bdf"] == target]
        if not mine:
            return _check("pci", False, "no PCI function at %s (%s): the GPU was not enumerated in this boot"
                          % (target, source), "not on the PCI bus", lost=True, source=source)
        if mine[0].get("answers") is False:
            return _check("pci", False, "%s reads all ones (lspci: rev ff): the GPU fell off the bus" % target,
                          "lspci rev ff", lost=True, source=source)
        if mine[0].get("answers") is None:
            return _check("pci", None, "%s: %s" % (target, mine[0].get("error")), "PCI unknown", source=source)
        others = [f["bdf"] for f in gone if f["bdf"] != target]
        note = "; also off the bus: %s" % ", ".join(others) if others else ""
        return _check("pci", True, "%s answers config reads (rev %02x, %s)%s"
                      % (target, mine[0].get("revision") or 0, source, note), "PCI ok", source=source)
    if not gpus:
        return _check("pci", False, "no NVIDIA GPU on the PCI bus (%s)" % source, "no NVIDIA GPU on the bus",
                      lost=True, source=source)
    if gone:
        return _check("pci", False, "%s read(s) all ones (lspci: rev ff): off the bus" % ", ".join(f["bdf"] for f in gone),
                      "lspci rev ff", lost=True, source=source)
    return _check("pci", True, "%d NVIDIA GPU function(s) answer config reads (%s)" % (len(gpus), source),
                  "PCI ok", source=source)


def run_bounded(argv: List[str], timeout_s: float,
                kill_wait_s: float = SMI_KILL_WAIT_S) -> Tuple[Optional[int], str, float, bool]:
    """(exit status or None when killed, output, seconds, stuck): a command that overruns
    ``timeout_s`` is SIGKILLed with its session; one still alive ``kill_wait_s`` later is in
    uninterruptible sleep (stuck in a driver) and is left behind, never waited on."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return proc.returncode, out.decode("utf-8", "replace"), time.monotonic() - started, False
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        out, _ = proc.communicate(timeout=kill_wait_s)
    except subprocess.TimeoutExpired:
        return None, "", time.monotonic() - started, True
    return None, out.decode("utf-8", "replace"), time.monotonic() - started, False


def check_nvidia_smi(target: str, timeout_s: float = SMI_TIMEOUT_S) -> Dict[str, Any]:
    """``nvidia-smi -i TARGET --query-gpu=pci.bus_id,name`` answers within ``timeout_s``."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return _check("nvidia_smi", None, "nvidia-smi not found on PATH", "nvidia-smi missing")
    argv = [smi, "-i", target, SMI_QUERY, "--format=csv,noheader"]
    try:
        rc, out, took, stuck = run_bounded(argv, timeout_s)
    except OSError as exc:
        return _check("nvidia_smi", None, "nvidia-smi could not start: %s" % exc, "nvidia-smi unknown")
    said = " ".join(line.strip() for line in out.strip().splitlines()[:3])[:300]
    if rc is None:
        how = "and is still there after SIGKILL (stuck in the driver)" if stuck else "and was killed"
        return _check("nvidia_smi", False, "nvidia-smi did not answer within %g s %s" % (timeout_s, how),
                      "nvidia-smi hung", seconds=round(took, 3))
    if rc != 0:
        meaning = SMI_EXIT_MEANINGS.get(rc, "not one of its documented statuses")
        lost = rc in SMI_LOST_EXITS or any(word in out for word in SMI_LOST_WORDS)
        return _check("nvidia_smi", False, "nvidia-smi -i %s exit %d (%s): %s" % (target, rc, meaning, said or "no output"),
                      "nvidia-smi exit %d" % rc, lost=lost, rc=rc, seconds=round(took, 3))
    return _check("nvidia_smi", True, "nvidia-smi answered in %.1f s: %s" % (took, said), "nvidia-smi ok", rc=0,
                  seconds=round(took, 3))


def collect(index: int, bus_id: Optional[str] = None, expect_gpus: Optional[int] = None,
            smi_timeout_s: float = SMI_TIMEOUT_S) -> Dict[str, Any]:
    """The `health` line: each check's result and words; ``ok`` when none failed."""
    pynvml, why = nv.load()
    if pynvml is None:
        binding = nv.binding_name()
        nvml = _check("nvml", None if binding is None else False, why or "NVML unavailable",
                      "NVML unavailable" if binding is None else "NVML: %s" % why)
        seen = None
    else:
        try:
            nvml = check_nvml(pynvml, index, bus_id, expect_gpus)
        finally:
            nv.release(pynvml)
        seen = nvml.get("bus_id")
    target_bus = bus_id or seen
    checks = [nvml, check_pci(target_bus), check_nvidia_smi(target_bus or str(index), smi_timeout_s)]
    return {"k": "health", "gpu": index, "bus_id": target_bus, "boot_id": state.read_boot_id(),
            "ok": not any(c["ok"] is False for c in checks), "lost": any(c["lost"] for c in checks),
            "checks": checks}
