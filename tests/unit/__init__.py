"""Pure logic without a host: parsers, stats, playbooks and inventories, report text, the CLI,
the power drivers against in-memory devices, the simulator's parts without namespaces."""
