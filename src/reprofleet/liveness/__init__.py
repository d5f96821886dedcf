"""Is a host alive? Independent probes, the per-host watchdog and the partition guard's witnesses."""
