"""One host through its plan: each object here belongs to one host's runner, so a decision
about a host is made by code that sees only that host.

Modules: ``host`` (the plan loop: slots in plan order, silences sent to recovery, the one
quarantine), ``link`` (the host's session and agent behind one lock, its boot, its lease,
stopping an attempt), ``policy_keeper`` (the GPU settings: ensure, re-apply, restore),
``preparation`` (lease, orphans, facts, the PoC and cache pushed; a host silent at the
start), ``attempt_run`` (one attempt from its settings to its record), ``slot_record``
(records built once, appended, amended), ``infra_streak`` (the same infra reason too often in
a row), ``give_back`` (what a host gets back at the end), ``power_gate`` (the partition guard and
the correlated-silence hold before any power action), ``port``
(the HostPort seam: how a runner reaches its host), ``host_log`` (a host's event sink
for the helpers it owns), ``context``
(what every runner of a campaign shares), ``attempt`` (one attempt followed to its
outcome), ``recovery`` (wedged -> off -> on -> booted -> ready, or the reason to quarantine), ``stops``
(stop rules on one host), ``gpu_policy`` (apply, read back, verify, restore),
``host_debug`` (lockup-to-panic sysctls), ``netconsole`` (a host's netconsole through a
campaign), ``runtimes`` (what software really ran), ``cache_sync`` (content-addressed
cache snapshots), ``poc`` (the reproducer's command line), ``readiness`` (can the host run
its plan at all: nvidia-smi, NVML, the GPU index, docker; from its facts), ``health_gate``
(a host back from a wedge rejoins only with its GPU still there), ``self_reset_grace`` (how
long a silent host is given to reset itself, from its facts), ``nmi_rung`` (the recovery
ladder's NMI before the power cycle), ``plug_gate`` (a plug that would switch the host off by
itself refuses it before its first attempt), ``search`` (a search's or
bisection's ladder, shared by every host runner: which cell each host runs next),
``slurm_node`` (a host that is a Slurm node: drained before its first attempt, its jobs waited
for, down on a wedge, drained again when healthy, given back at the end).
"""
