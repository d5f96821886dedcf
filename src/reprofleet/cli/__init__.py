"""The only layer that knows Invoke and rich: flags in, exit codes and tables out.

Modules: ``tasks`` (the Invoke tasks, thin), ``args`` (positional arguments Invoke lacks),
``exits`` (errors -> exit codes and one line on stderr), ``env_config`` (INVOKE_REPROFLEET_* read
by type, the project file found as invoke finds it), ``flags`` (one flag table for every task:
-i/--inventory, -l/--limit, the same letters everywhere, -h is help), ``progress`` (the live view and
the summary), ``tables`` (the tables of ``invoke facts`` and ``invoke policy``), ``signals`` (a stop
signal sets the clean stop before anything is printed; nohup is honoured).
"""
