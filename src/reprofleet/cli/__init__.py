"""The only layer that knows Invoke and rich: tasks, arguments, exit codes, progress."""
