"""One host through its plan: the runner, one attempt followed to its outcome, recovery, stop rules, GPU policy, host_debug, netconsole, runtimes, cache sync."""
