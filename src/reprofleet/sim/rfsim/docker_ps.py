"""``docker ps`` and ``docker kill`` against the simulated daemon's records.

``docker ps [-a] [-q] [--no-trunc] [-f KEY=VALUE]... [--format TEMPLATE]``: running
containers (``-a``: also created and exited ones not removed), newest first. Filters:
``label=KEY`` / ``label=KEY=VALUE`` (every label filter must match), ``name=`` (a regular
expression searched in the name), ``id=`` (a prefix), ``status=`` (created|running|exited);
values of one key are alternatives, different keys must all match; any other key is
"invalid filter". Templates are docker's Go templates as scripts use them: ``{{.ID}}``
(12 hex digits unless ``--no-trunc``), ``{{.Names}}``, ``{{.Image}}``, ``{{.Command}}``,
``{{.CreatedAt}}``, ``{{.RunningFor}}``, ``{{.Status}}``, ``{{.State}}``, ``{{.Labels}}``
(k=v joined by commas), ``{{.Label "KEY"}}``, ``{{.Ports}}``, ``{{.Mounts}}``, ``{{json .X}}``;
a ``table`` prefix adds the header line, ``\\t`` and ``\\n`` are escapes; ``-q`` alone is
``{{.ID}}``. The default is docker's table.

``docker kill [-s SIGNAL] CONTAINER...``: the signal (default KILL; a name with or without
SIG, or a number) to each container's PID 1; prints each reference it signalled, says
"No such container" or "is not running" on stderr for the others, exit 1 if any failed.

Host-side module: standard library only.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from . import docker_state
from .docker_state import Container, DaemonError

DEFAULT_TABLE = "table {{.ID}}\t{{.Image}}\t{{.Command}}\t{{.RunningFor}}\t{{.Status}}\t{{.Ports}}\t{{.Names}}"
FILTER_KEYS = ("label", "name", "id", "status")
STATUSES = ("created", "running", "exited")
HEADERS = {"ID": "CONTAINER ID", "Names": "NAMES", "Image": "IMAGE", "Command": "COMMAND",
           "CreatedAt": "CREATED AT", "RunningFor": "CREATED", "Status": "STATUS", "State": "STATE",
           "Labels": "LABELS", "Label": "LABEL", "Ports": "PORTS", "Mounts": "MOUNTS"}
ACTION = re.compile(r"\{\{\s*(json\s+)?\.(\w+)(?:\s+\"([^\"]*)\")?\s*\}\}")
COMMAND_WIDTH = 20


class Usage(Exception):
    """A command line docker refuses before asking the daemon (exit 1)."""


@dataclass(frozen=True)
class PsOptions:
    all: bool = False
    quiet: bool = False
    no_trunc: bool = False
    filters: Tuple[Tuple[str, str], ...] = ()
    template: Optional[str] = None


def _value(rest: List[str], token: str) -> str:
    flag, sep, value = token.partition("=")
    if sep:
        return value
    if not rest:
        raise Usage(f"flag needs an argument: {flag}")
    return rest.pop(0)


def parse_ps(args: Sequence[str]) -> PsOptions:
    rest = list(args)
    opts: Dict[str, object] = {}
    filters: List[Tuple[str, str]] = []
    while rest:
        token = rest.pop(0)
        flag = token.partition("=")[0]
        if token in ("-a", "--all"):
            opts["all"] = True
        elif token in ("-q", "--quiet"):
            opts["quiet"] = True
        elif token == "--no-trunc":
            opts["no_trunc"] = True
        elif token in ("-aq", "-qa"):
            opts["all"] = opts["quiet"] = True
        elif flag in ("-f", "--filter"):
            key, sep, value = _value(rest, token).partition("=")
            if not sep:
                raise Usage("bad format of filter (expected name=value)")
            filters.append((key.lower(), value))
        elif flag == "--format":
            opts["template"] = _value(rest, token)
        else:
            raise Usage(f"unknown flag: {flag}" if token.startswith("-") else f"\"docker ps\" accepts no arguments.")
    return PsOptions(filters=tuple(filters), **opts)  # type: ignore[arg-type]


def state_of(container: Container) -> str:
    """created | running | exited, as the daemon judges it now."""
    if container.running:
        return "running"
    return "exited" if container.status in ("running", "exited") else "created"


def matches(container: Container, filters: Sequence[Tuple[str, str]]) -> bool:
    by_key: Dict[str, List[str]] = {}
    for key, value in filters:
        if key not in FILTER_KEYS:
            raise DaemonError(f"invalid filter '{key}'")
        by_key.setdefault(key, []).append(value)
    for key, values in by_key.items():
        if key == "label" and not all(_label_matches(container.labels, v) for v in values):
            return False
        if key == "name" and not any(re.search(v, "/" + container.name) for v in values):
            return False
        if key == "id" and not any(container.id.startswith(v) for v in values):
            return False
        if key == "status":
            bad = [v for v in values if v not in STATUSES]
            if bad:
                raise DaemonError(f"invalid filter 'status={bad[0]}'")
            if state_of(container) not in values:
                return False
    return True


def _label_matches(labels: Dict[str, str], wanted: str) -> bool:
    key, sep, value = wanted.partition("=")
    return key in labels and (not sep or labels[key] == value)


def human_duration(seconds: float) -> str:
    """go-units' HumanDuration, which docker ps uses for CREATED and STATUS."""
    whole = int(seconds)
    if whole < 1:
        return "Less than a second"
    if whole == 1:
        return "1 second"
    if whole < 60:
        return f"{whole} seconds"
    minutes = int(seconds / 60)
    if minutes == 1:
        return "About a minute"
    if minutes < 60:
        return f"{minutes} minutes"
    hours = int(seconds / 3600 + 0.5)
    if hours == 1:
        return "About an hour"
    if hours < 48:
        return f"{hours} hours"
    if hours < 24 * 7 * 2:
        return f"{hours // 24} days"
    if hours < 24 * 30 * 2:
        return f"{hours // 24 // 7} weeks"
    if hours < 24 * 365 * 2:
        return f"{hours // 24 // 30} months"
    return f"{hours // 24 // 365} years"


def status_text(container: Container, now: float) -> str:
    state = state_of(container)
    if state == "running":
        return "Up " + human_duration(now - float(container.state.get("started", now)))
    if state == "exited":
        finished = float(container.state.get("finished") or now)
        code = container.state.get("exit_code", docker_state.LOST_EXIT)
        return f"Exited ({code}) {human_duration(now - finished)} ago"
    return "Created"


def _command(container: Container, no_trunc: bool) -> str:
    text = " ".join(container.config.get("command") or [])
    if not no_trunc and len(text) > COMMAND_WIDTH:
        text = text[:COMMAND_WIDTH - 1] + "\u2026"
    return json.dumps(text, ensure_ascii=False)


def fields_of(container: Container, no_trunc: bool, now: float) -> Dict[str, Callable[[str], object]]:
    """Each placeholder's value (a function of the argument only .Label takes)."""
    labels = container.labels
    created = float(container.config.get("created", now))
    return {
        "ID": lambda _a: container.id if no_trunc else container.id[:12],
        "Names": lambda _a: container.name,
        "Image": lambda _a: container.config.get("image", ""),
        "Command": lambda _a: _command(container, no_trunc),
        "CreatedAt": lambda _a: time.strftime("%Y-%m-%d %H:%M:%S +0000 UTC", time.gmtime(created)),
        "RunningFor": lambda _a: human_duration(now - created) + " ago",
        "Status": lambda _a: status_text(container, now),
        "State": lambda _a: state_of(container),
        "Labels": lambda _a: ",".join(f"{k}={v}" for k, v in sorted(labels.items())),
        "Label": lambda key: labels.get(key, ""),
        "Ports": lambda _a: "",
        "Mounts": lambda _a: ",".join(m.get("source", "") for m in container.config.get("plan", {}).get("mounts", [])),
    }


def _json_value(name: str, container: Container, value: object) -> str:
    if name == "Labels":
        return json.dumps(container.labels, separators=(",", ":"), sort_keys=True)
    return json.dumps(value, separators=(",", ":"))


def render(template: str, container: Container, no_trunc: bool, now: float) -> str:
    values = fields_of(container, no_trunc, now)

    def one(match: "re.Match[str]") -> str:
        name, argument = match.group(2), match.group(3) or ""
        if name not in values:
            raise Usage(f"template: :1:{match.start() + 3}: executing \"\" at <.{name}>: "
                        f"can't evaluate field {name} in type *formatter.ContainerContext")
        value = values[name](argument)
        return _json_value(name, container, value) if match.group(1) else str(value)

    return ACTION.sub(one, template)


def header(template: str) -> str:
    return ACTION.sub(lambda m: HEADERS.get(m.group(2), m.group(2).upper()), template)


def tabulate(rows: List[str]) -> List[str]:
    """Go's tabwriter as docker sets it up: cells padded to the column's width + 3, at
    least 10; the last cell of a line is not padded."""
    cells = [row.split("\t") for row in rows]
    widths: Dict[int, int] = {}
    for line in cells:
        for i, cell in enumerate(line[:-1]):
            widths[i] = max(widths.get(i, 10), len(cell) + 3)
    return ["".join(c.ljust(widths[i]) for i, c in enumerate(line[:-1])) + line[-1] for line in cells]


def format_listing(containers: Sequence[Container], opts: PsOptions, now: Optional[float] = None) -> List[str]:
    now = time.time() if now is None else now
    template = opts.template
    if template in (None, "", "table") and opts.quiet:
        template = "{{.ID}}"
    elif template in (None, "", "table"):
        template = DEFAULT_TABLE
    table = template.startswith("table")
    body = template[len("table"):].strip(" ") if table else template
    body = body.replace("\\t", "\t").replace("\\n", "\n")
    rows = ([header(body)] if table else []) + [render(body, c, opts.no_trunc, now) for c in containers]
    return tabulate(rows) if table else rows


def listed(opts: PsOptions) -> List[Container]:
    with docker_state.daemon_lock():
        docker_state.housekeeping()
    chosen = []
    for container in docker_state.all_containers():
        if not opts.all and state_of(container) != "running":
            continue
        if matches(container, opts.filters):
            chosen.append(container)
    return chosen


def ps(args: Sequence[str]) -> int:
    try:
        opts = parse_ps(args)
        lines = format_listing(listed(opts), opts)
    except Usage as exc:
        sys.stderr.write(f"{exc}\nSee 'docker ps --help'.\n")
        return 1
    except DaemonError as exc:
        sys.stderr.write(f"Error response from daemon: {exc}\n")
        return 1
    for line in lines:
        print(line)
    return 0


def parse_signal(text: str) -> int:
    """KILL, SIGKILL, kill or 9, as docker's signal parser takes them."""
    if text.isdigit():
        number = int(text)
        if number in {int(s) for s in signal.valid_signals()} and number != 0:
            return number
        raise DaemonError(f"Invalid signal: {text}")
    name = text.upper()
    name = name if name.startswith("SIG") else "SIG" + name
    try:
        return int(signal.Signals[name])
    except KeyError:
        raise DaemonError(f"Invalid signal: {text}") from None


@dataclass
class KillArgs:
    signal_text: str = "KILL"
    refs: List[str] = field(default_factory=list)


def parse_kill(args: Sequence[str]) -> KillArgs:
    rest, parsed = list(args), KillArgs()
    while rest:
        token = rest.pop(0)
        flag = token.partition("=")[0]
        if flag in ("-s", "--signal"):
            parsed.signal_text = _value(rest, token)
        elif token.startswith("-") and token != "-":
            raise Usage(f"unknown flag: {flag}")
        else:
            parsed.refs.append(token)
    if not parsed.refs:
        raise Usage("\"docker kill\" requires at least 1 argument.")
    return parsed


def kill_one(ref: str, signum: int) -> None:
    with docker_state.daemon_lock():
        docker_state.housekeeping()
    container = docker_state.find(ref)
    if not container.running:
        raise DaemonError(f"cannot kill container: {ref}: container {container.id} is not running")
    try:
        os.kill(int(container.state["pid"]), signum)
    except ProcessLookupError:
        raise DaemonError(f"cannot kill container: {ref}: container {container.id} is not running") from None


def kill(args: Sequence[str]) -> int:
    try:
        parsed = parse_kill(args)
        signum = parse_signal(parsed.signal_text)
    except Usage as exc:
        sys.stderr.write(f"docker: {exc}\nSee 'docker kill --help'.\n")
        return 1
    except DaemonError as exc:
        sys.stderr.write(f"Error response from daemon: {exc}\n")
        return 1
    failed = False
    for ref in parsed.refs:
        try:
            kill_one(ref, signum)
        except DaemonError as exc:
            sys.stderr.write(f"Error response from daemon: {exc}\n")
            failed = True
            continue
        print(ref, flush=True)
    return 1 if failed else 0
