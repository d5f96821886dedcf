"""Is a host alive? The answer must not come from the (possibly stalled) connection of an
attempt, nor blame a host for the controller's own network.

Modules: ``probes`` (independent probes: a fresh SSH banner, ICMP; DEAD / KERNEL / SSHD),
``watchdog`` (silence, then rounds of probes, a verdict per host; the fleet-wide view),
``rounds`` (one suspect's probe rounds, each in its own thread, on a steady grid),
``witness`` (the partition guard: is the controller's network working?), ``silence_hold``
(several hosts silent at once: a freeze, or their switch?), ``peer_evidence`` (a DEAD round
taken while a host of the same segment answered: the host's own silence).
"""
