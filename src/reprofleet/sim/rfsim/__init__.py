"""Host-side simulation code (standard library only), copied onto every simulated host.

On a simulated host this package is importable as ``rfsim`` from the host's dist-packages
(next to the fake ``pynvml`` and ``vllm``); on the controller it is
``reprofleet.sim.rfsim``. Modules import each other only relatively, so both work.
"""
