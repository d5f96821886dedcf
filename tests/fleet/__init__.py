"""Every test marked ``fleet``: the simulated fleet (real sshd in network namespaces, needs root)
and the power simulators. `make test` runs them after the unit phase, a module on one worker
(``--dist loadfile``), and the ones also marked ``alone`` with nothing beside them."""
