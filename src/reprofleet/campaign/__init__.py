"""A campaign as a whole, and the operations a person runs on a fleet by hand: above the
runners, below the command line.

Modules: ``pipeline`` (``invoke campaign`` and ``demo`` below the command line: everything
read and checked, then the plan described or run), ``settings`` (the ``reprofleet:`` config
section -> run settings, power defaults, notifier), ``run`` (plan, hosts in parallel, resume,
stop), ``left_off`` (a second Ctrl-C: the outlets this controller left off, switched on before it exits), ``resume`` (a resume is the same experiment: the folder, the stored playbook, what changed), ``preflight`` (checks that need no host, and the hosts a playbook and ``--limit`` choose), ``stop_walk`` (each stop rule's course per host, walked exactly as the runner asks it), ``estimate`` (attempts, hours, power cycles and what the verdicts can show, before it
runs), ``simulate`` (campaigns drawn from a known truth, judged by the real judge: for
``estimate`` and the benches), ``facts`` (``invoke facts``), ``bug_report``
(``invoke facts --bug-report``: each host's nvidia-bug-report.sh archive), ``doctor`` (``invoke doctor``:
what each host needs, and the fix), ``doctor_items`` (its items: ``Check`` and ``Status``),
``doctor_power`` (its items about the way back from a wedge: kdump, the plug's own behaviour), ``doctor_slurm`` (the doctor's Slurm items: slurmctld,
munge, the rights to drain, each node's state, reason and jobs), ``shard_slices`` (which hosts each
controller shard runs: disjoint, balanced, outlet groups kept whole), ``shards`` (``invoke campaign
--shards``: the shards submitted as Slurm jobs, and the request each shard's job runs), ``cycle_test`` (``invoke doctor --cycle``'s decisions: one supervised
power cycle per idle host, through a port), ``cycle_lab`` (that port over SSH, probes and the power
drivers, and the doctor folder), ``starter`` (``reprofleet init``: a starter inventory and playbook
for the hosts a user names), ``policy_restore`` (``invoke policy``), ``power_ops``
(``invoke power``), ``cache_ops`` (``invoke cache.push`` / ``cache.pull``), ``observe``
(every line the campaign writes, told to its watchers), ``notify`` (what a person is told,
once each), ``notify_text`` (a host's words in a notice, quoted), ``notify_senders`` (invoke.yaml's ``notify:``: Apprise URLs and a command),
``metrics`` (metrics.prom, the Prometheus textfile kept while it runs), ``search_sim`` (a
boundary search or bisection simulated against known true curves, beside a full grid and a
fixed-run rule: for ``invoke plan`` and bench/search.py), ``search_estimate`` (``invoke plan``
of a search or bisection: simulated against stated true curves), ``planning`` (``invoke plan``
below the command line: which estimate its flags ask for).
"""
