"""pynvml on a simulated host: the fake NVML of reprofleet's simulated fleet.

Same names as nvidia-ml-py; values come from the host's fake RTX PRO 6000 (rfsim.gpu).
"""

from rfsim.nvml import *  # noqa: F401,F403
from rfsim.nvml import NVMLError, c_nvmlDevice_t  # noqa: F401  (explicit for readers)
