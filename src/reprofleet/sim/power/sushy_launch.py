"""sushy-tools' emulator with its fake driver's reset delay as a choice:
``python -m reprofleet.sim.power.sushy_launch LOW HIGH --config FILE``.

The fake driver applies each reset ``random.randint(1, 11)`` seconds after it was asked
(sushy_tools/emulator/resources/systems/fakedriver.py, "hardware actions are not
immediate"), which is what real BMCs do and what the slow-BMC tests keep (1..11, the
default). A test whose subject is not the delay (a 409 window, a POST refusal, TLS) asks
for 0..1 s and takes seconds instead of half a minute; nothing else of the emulator changes.
"""

from __future__ import annotations

import random
import sys


class ResetDelay(random.Random):
    """``randint`` between the chosen bounds, whatever bounds the emulator passes."""

    def __init__(self, low: int, high: int) -> None:
        super().__init__()
        self.low, self.high = low, high

    def randint(self, a: int, b: int) -> int:
        return super().randint(self.low, self.high)


def main(argv: list[str]) -> int:
    low, high, *rest = argv[1:]
    from sushy_tools.emulator.resources.systems import fakedriver

    fakedriver.random = ResetDelay(int(low), int(high))
    from sushy_tools.emulator import main as emulator

    sys.argv = ["sushy-emulator", *rest]
    return int(emulator.main() or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
