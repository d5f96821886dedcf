"""A campaign: plan, run (hosts in parallel), resume, preflight, estimate, and the by-hand operations on a fleet."""
