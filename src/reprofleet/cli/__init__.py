"""The only layer that knows Invoke and rich: flags in, exit codes and tables out.

Each task parses its flags, builds the request of the layer that owns the work, calls it,
and prints what comes back; reading records, running hosts and writing reports happen below.

Modules: ``tasks`` (the Invoke collection, gathered from the task groups), ``campaign_tasks``
(campaign, demo, plan), ``report_tasks`` (report, compare, status, export), ``fleet_tasks``
(facts, doctor, power, policy, cache.*, sim.*), ``init_task`` (init: a starter inventory and
playbook), ``config`` (the defaults of every setting and
the ``reprofleet:`` section as plain values), ``output`` (consoles, one JSON document or JSON
lines), ``args`` (positional arguments Invoke lacks, and the checks of typed values), ``exits``
(errors -> exit codes and one line on stderr), ``env_config`` (INVOKE_REPROFLEET_* read by type,
the project file found as invoke finds it), ``flags`` (one flag table for every task:
-i/--inventory, -l/--limit, the same letters everywhere, -h is help), ``progress`` (the live view
and the summary), ``tables`` (the tables of ``invoke facts`` and ``invoke policy``), ``terminal_text`` (a host's
text on the terminal: inert, never markup; a failed print logged, never raised), ``signals`` (a
stop signal sets the clean stop before anything is printed; nohup is honoured).
"""
