"""The host-side agent (collectors/), run locally as a subprocess or imported module, with fake
GPU tools (tests/fixtures/agent/); no SSH, no simulated fleet."""
