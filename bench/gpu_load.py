"""A small, bounded GPU load for capturing real telemetry (used on the device machine).

Runs bf16 matrix products at a modest duty cycle for N seconds and prints one line a
second, like a PoC would. Read-only with respect to the GPU's settings: it changes no
clock, power limit or mode.
"""

from __future__ import annotations

import sys
import time


def main() -> int:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    import torch

    device = torch.device("cuda:0")
    a = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
    end = time.monotonic() + seconds
    second = 0
    while time.monotonic() < end:
        busy_until = time.monotonic() + 0.3  # ~30% duty: a load, not a burn
        while time.monotonic() < busy_until:
            (a @ b).sum().item()
        time.sleep(0.7)
        second += 1
        print(f"gpu_load: second {second}, {torch.cuda.memory_allocated() >> 20} MiB allocated", flush=True)
    print("gpu_load: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
