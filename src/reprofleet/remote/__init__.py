"""The only edge to a host: everything the controller says to a host, or hears from it, goes
through here, so a host's bytes are bounded and parsed in one place.

Modules: ``transport`` (SSH through Fabric/paramiko: strict host keys, a liveness monitor
that needs a reply), ``ssh`` (the system ``ssh`` binary for bulk bytes), ``agent`` (the
client of the host agent in ``collectors/``: push under a content hash, JSON lines),
``session`` (one by-hand agent session: connect, push, one piece of work, close),
``host_commands`` (every short shell command the controller runs on a host, each with
its pure parser), ``bug_report_commands`` (what `facts --bug-report` runs on a host), ``replies`` (the agent's replies parsed into frozen dataclasses, in one place),
``host_bytes`` (every line and reply a host sends, read with a size bound and parsed as JSON
in one place: too long, not UTF-8, NUL, not JSON, too deep, huge integers are one error),
``netconsole`` (the UDP receiver of hosts' kernel messages), ``netconsole_lines`` (its datagrams
put together into kernel lines, every size a sender controls capped), ``netconsole_budget``
(what one source address may send it per second).
"""
