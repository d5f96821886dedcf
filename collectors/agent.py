#!/usr/bin/env python3
"""reprofleet host agent: the one program the controller runs on a test host.

Standard library only (plus pynvml when the host has it); never imports reprofleet.
Speaks JSON lines on stdout and diagnostics on stderr, per collectors/PROTOCOL.md.
This file parses the command line and maps failures to exit statuses in one place;
each subcommand lives in a module of its own beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import traceback
from typing import Any, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import attempt_state as state  # noqa: E402
from agent_protocol import (  # noqa: E402
    AgentFailure, ExitStatus, StdoutClosed, UsageError, emit, quiet_exit_on_closed_stdout, warn,
)

AGENT_PATH = os.path.abspath(__file__)


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting."""

    def error(self, message: str) -> Any:
        raise UsageError(message)


def build_parser() -> Parser:
    parser = Parser(prog="agent.py", description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", default=state.default_state_dir(),
                        help="where attempts and baselines live (default ~/.cache/reprofleet)")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    sub.add_parser("facts", help="one line describing this host and its GPUs")
    run = sub.add_parser("run", help="start a supervised attempt: run ... -- CMD ARG...")
    run.add_argument("--id", required=True)
    run.add_argument("--timeout", type=float, required=True)
    run.add_argument("--cwd", default=None)
    run.add_argument("--env", action="append", default=[], metavar="K=V")
    run.add_argument("--secrets-stdin", action="store_true",
                     help="one JSON line on stdin: {NAME: value}, for the PoC's environment only")
    run.add_argument("--key-stdin", action="store_true",
                     help="the attempt's key (64 hex digits) on stdin's first line: every line is signed with it")
    run.add_argument("--gpu", type=int, default=0)
    run.add_argument("--sample-hz", type=float, default=10.0)
    run.add_argument("--clock-threshold", type=float, default=2800.0, metavar="MHZ")
    run.add_argument("--hb", type=float, default=0.5)
    run.add_argument("--container", default=None, help="the docker container the PoC runs as (docker kill NAME at its end)")
    run.add_argument("--kill-grace", type=float, default=5.0, help=argparse.SUPPRESS)
    run.add_argument("--kmsg", default="/dev/kmsg", help=argparse.SUPPRESS)  # "" = no kernel log
    _lease_flags(run)
    attach = sub.add_parser("attach", help="stream an attempt's events from a seq on")
    attach.add_argument("--id", required=True)
    attach.add_argument("--from", dest="start_seq", type=int, default=0)
    attach.add_argument("--hb", type=float, default=0.5)
    attach.add_argument("--key-stdin", action="store_true",
                        help="the attempt's key on stdin's first line: only a signed exit line ends the stream")
    kill = sub.add_parser("kill", help="stop a running attempt")
    kill.add_argument("--id", required=True)
    _lease_flags(kill)
    policy = sub.add_parser("policy", help="apply, read or restore a GPU policy")
    policy.add_argument("action", choices=("apply", "read", "restore"))
    policy.add_argument("--gpu", type=int, default=0)
    policy.add_argument("--json", default=None, help="GpuPolicy fields (apply only)")
    _lease_flags(policy)
    debug = sub.add_parser("host-debug", help="apply, read or restore the lockup-to-panic sysctls")
    debug.add_argument("action", choices=("apply", "read", "restore"))
    debug.add_argument("--json", default=None, help="kernel sysctl names and values (apply only)")
    _lease_flags(debug)
    netcons = sub.add_parser("netconsole", help="apply, read or restore the kernel's netconsole to the controller")
    netcons.add_argument("action", choices=("apply", "read", "restore"))
    netcons.add_argument("--json", default=None, help="port, dev, target, extended (apply only)")
    _lease_flags(netcons)
    health = sub.add_parser("health", help="is the GPU still there: NVML, the PCI bus, nvidia-smi (gpu_health.py)")
    health.add_argument("--gpu", type=int, default=0)
    health.add_argument("--bus-id", default=None, help="the GPU's PCI bus id before the wedge (NVML's form)")
    health.add_argument("--expect-gpus", type=int, default=None, help="how many GPUs NVML listed before the wedge")
    health.add_argument("--smi-timeout", type=float, default=20.0, help="seconds nvidia-smi may take to answer")
    postboot = sub.add_parser("postboot", help="what the previous boot left behind")
    postboot.add_argument("--pstore", default="/sys/fs/pstore", help=argparse.SUPPRESS)
    postboot.add_argument("--boot", default=None, help="the boot an attempt ran in (its boot_id); default: boot -1")
    lease = sub.add_parser("lease", help="take, give back or show this host's campaign lease")
    lease.add_argument("action", choices=("acquire", "release", "show"))
    lease.add_argument("--controller", default="")
    lease.add_argument("--campaign", default="")
    lease.add_argument("--pid", type=int, default=0)
    lease.add_argument("--break", dest="break_lease", action="store_true", help="take a lease another campaign holds")
    lease.add_argument("--lease-stdin", action="store_true",
                       help="this controller run's random token on stdin's first line (acquire, release)")
    lease.add_argument("--ttl", type=float, default=3600.0, help="seconds the lease holds without renewal")
    listing = sub.add_parser("attempts", help="the newest attempts on this host and whether they still run")
    listing.add_argument("--running", action="store_true", help="only attempts whose supervisor is alive")
    cache = sub.add_parser("cache", help="content-addressed cache snapshots (collectors/cache_store.py)")
    cache.add_argument("action", choices=("have", "receive", "materialize", "manifest", "send"))
    cache.add_argument("--snapshot", default=None, help="the manifest's sha256 (have, receive, materialize)")
    cache.add_argument("--manifest-stdin", action="store_true", help="have: the manifest arrives on stdin")
    cache.add_argument("--dest", default=None, help="the cache folder to build (materialize) or read (manifest, send)")
    cache.add_argument("--if-empty", action="store_true", help="materialize only into a missing or empty folder")
    _lease_flags(cache)
    runtime = sub.add_parser("runtime", help="image digests, interpreter and package versions (runtime_probe.py)")
    runtime.add_argument("action", choices=("image", "python", "venv"))
    runtime.add_argument("--json", default=None, help="the runtime's settings")
    _lease_flags(runtime)
    supervise = sub.add_parser(state.SUPERVISOR_ARG)
    supervise.add_argument("--id", required=True)
    return parser


def _lease_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lease-stdin", action="store_true",
                        help="the caller's lease token on stdin's first line (refused when stale)")
    parser.add_argument("--ignore-lease", action="store_true", help="act on a leased host anyway (by hand)")


LEASE_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,128}$")

# The subcommands (and actions) that change this host: each carries the caller's lease token
# and is refused when it is stale. `run` and `kill` check it themselves (under the host lock).
FENCED_ACTIONS = {
    "policy": ("apply", "restore"),
    "host-debug": ("apply", "restore"),
    "netconsole": ("apply", "restore"),
    "cache": ("have", "receive", "materialize"),
    "runtime": ("image", "venv"),
}


def read_lease_token(args: argparse.Namespace) -> None:
    """``--lease-stdin``: the lease token is stdin's first line, before the attempt's key and
    its secrets. Never on the command line, where every user of the host reads it with ``ps``
    (and a long-running ``run`` keeps it there for hours)."""
    args.lease_token = None
    if not getattr(args, "lease_stdin", False):
        return
    try:
        token = sys.stdin.buffer.readline(256).decode("ascii").strip()
    except UnicodeDecodeError:
        token = ""
    if not LEASE_TOKEN.match(token):
        raise UsageError("--lease-stdin wants the lease token (1 to 128 of A-Z a-z 0-9 _ -) on stdin's first line")
    args.lease_token = token


def _check_lease(args: argparse.Namespace, renew: bool = False) -> None:
    """Fencing: a call that may change the GPU or its attempts carries the lease's token."""
    import host_lease

    try:
        host_lease.check(args.state_dir, args.lease_token, args.ignore_lease, renew=renew)
    except host_lease.LeaseRefused as exc:
        raise AgentLeaseRefused(str(exc), exc.code) from None


def split_command(argv: Sequence[str]) -> Tuple[List[str], List[str]]:
    """Agent arguments before the first ``--``, the PoC's command after it."""
    argv = list(argv)
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1:]
    return argv, []


def parse_env(pairs: Sequence[str]) -> Dict[str, str]:
    env: Dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or "\0" in pair:
            raise UsageError("--env wants K=V, got %r" % pair)
        env[key] = value
    return env


SECRETS_MAX_BYTES = 32768  # under a pipe's buffer: the supervisor's stdin is filled before it starts


def parse_secrets(data: bytes) -> Dict[str, str]:
    """The ``--secrets-stdin`` line: a JSON object of variable names to values; never echoed."""
    if len(data) > SECRETS_MAX_BYTES:
        raise UsageError("--secrets-stdin: more than %d bytes" % SECRETS_MAX_BYTES)
    try:
        secrets = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise UsageError("--secrets-stdin wants one JSON object on stdin") from None
    if not isinstance(secrets, dict) or not secrets:
        raise UsageError("--secrets-stdin wants a JSON object of NAME: value")
    for name, value in secrets.items():
        if not state.valid_env_name(name) or not isinstance(value, str) or "\0" in value:
            raise UsageError("--secrets-stdin: %r is not a variable name with a text value" % name)
    return secrets


def read_secrets() -> Dict[str, str]:
    """The secrets the controller wrote on stdin (then closed it)."""
    return parse_secrets(sys.stdin.buffer.read(SECRETS_MAX_BYTES + 1))


def read_key(args: argparse.Namespace) -> Optional[bytes]:
    """``--key-stdin``: the attempt's key, the first line on stdin (before any secrets). From
    here on this process's own lines are signed with it, and nothing of its uid may read its
    memory (attempt_mac.py)."""
    import attempt_mac
    from agent_protocol import sign_own_lines

    if not getattr(args, "key_stdin", False):
        return None
    try:
        key = attempt_mac.parse_key(sys.stdin.buffer.readline(256).decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise UsageError("--key-stdin wants the attempt's key, 64 hex digits, on stdin's first line") from None
    attempt_mac.protect_memory()
    sign_own_lines(attempt_mac.Signer(key))
    return key


class AgentLeaseRefused(AgentFailure):
    """Another controller holds this host's lease (code ``fenced`` or ``leased``): nothing was done."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class AgentBusy(AgentFailure):
    """Another attempt is alive on this host: the GPU is not ours to use."""

    code = "busy"  # the controller records the slot as not run (it runs again), never as a broken stream


def command_run(args: argparse.Namespace, cmd: List[str]) -> int:
    """Create the attempt, start the detached supervisor, then stream like attach.

    Refused while another attempt's supervisor is alive: a resumed or second controller
    must judge or kill an orphaned attempt, never start a PoC beside it on the same GPU.
    """
    import containers
    import host_lease
    import stream_follow

    if not state.valid_attempt_id(args.id):
        raise UsageError("invalid attempt id %r" % args.id)
    if not cmd:
        raise UsageError("run needs the PoC command after --")
    if args.timeout <= 0 or args.hb <= 0 or args.sample_hz < 0 or args.kill_grace < 0:
        raise UsageError("--timeout and --hb must be > 0, --sample-hz and --kill-grace >= 0")
    env = parse_env(args.env)
    key = read_key(args)
    secrets = read_secrets() if args.secrets_stdin else {}
    if set(secrets) & set(env):
        raise UsageError("a variable is given both as --env and as a secret: %s" % ", ".join(sorted(set(secrets) & set(env))))
    if args.container is not None and not containers.valid_name(args.container):
        raise UsageError("invalid container name %r" % args.container)
    with host_lease.host_lock(args.state_dir):  # two starts at once must not both see an idle GPU
        _check_lease(args, renew=True)  # every attempt renews the caller's lease; a stale one is refused
        alive = host_lease.running(args.state_dir)
        import docker_secrets

        docker_secrets.sweep(args.state_dir)  # the secrets a frozen attempt's docker file left behind
        if alive:
            raise AgentBusy("attempt %s is still running on this host (started %.0f s ago): kill it or judge it "
                            "before starting another" % (alive[0]["id"], alive[0]["age_s"]))
        _create_attempt(args, cmd, env, secrets, key)
    stream_follow.attach(args.state_dir, args.id, 0, args.hb, key)
    return ExitStatus.OK


def _create_attempt(args: argparse.Namespace, cmd: List[str], env: Dict[str, str],
                    secrets: Optional[Dict[str, str]] = None, key: Optional[bytes] = None) -> str:
    """The attempt's folder and meta, and its detached supervisor started. ``secrets`` and
    ``key`` reach the supervisor on its stdin and live in its memory only (the secrets also in
    the PoC's environment): meta.json (world-readable) keeps the secrets' names and whether the
    lines are signed. The PoC's working folder is ``work/`` (or ``--cwd``), never the attempt's
    folder, whose files the supervisor alone writes."""
    from detach import spawn_supervisor

    directory = state.attempt_dir(args.state_dir, args.id)
    work = os.path.join(directory, state.WORK)
    cwd = os.path.abspath(args.cwd) if args.cwd else work
    if args.cwd and not os.path.isdir(cwd):
        raise AgentFailure("--cwd %s is not a directory" % cwd)
    if os.path.realpath(cwd) == os.path.realpath(directory):
        raise UsageError("--cwd must not be the attempt's own folder: its files are the supervisor's")
    os.makedirs(os.path.dirname(directory), exist_ok=True)
    try:
        os.mkdir(directory)
    except FileExistsError:
        raise UsageError("attempt id %r already exists" % args.id) from None
    os.mkdir(work, 0o700)
    meta = {
        "id": args.id, "cmd": cmd, "cwd": cwd, "env": env, "timeout": args.timeout,
        "gpu": args.gpu, "sample_hz": args.sample_hz, "clock_threshold_mhz": args.clock_threshold,
        "hb": args.hb, "kill_grace_s": args.kill_grace,
        "kmsg_path": args.kmsg, "created": time.time(), "boot_id": state.read_boot_id(),
        "agent": AGENT_PATH, "python": sys.executable, "container": args.container,
        "secret_env": sorted(secrets or {}), "authenticated": key is not None,
    }
    open(os.path.join(directory, state.EVENTS), "ab").close()
    state.write_json_atomic(os.path.join(directory, state.META), meta)
    python = sys.executable or "python3"
    given = {"key": key.hex() if key is not None else None, "secrets": secrets or {}}
    spawn_supervisor(
        [python, AGENT_PATH, "--state-dir", args.state_dir, state.SUPERVISOR_ARG, "--id", args.id],
        directory, os.path.join(directory, state.SUPERVISOR_LOG),
        stdin_data=json.dumps(given).encode() if key is not None or secrets else b"",
    )
    _wait_for_supervisor(directory, args.id, meta)
    return directory


def _wait_for_supervisor(directory: str, attempt_id: str, meta: Dict[str, Any], deadline_s: float = 10.0) -> None:
    """Until the supervisor's pid file names a live process, another start could slip in."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if state.supervisor_alive(directory, attempt_id, meta) or os.path.exists(os.path.join(directory, state.EXIT)):
            return
        time.sleep(0.02)


def command_policy(args: argparse.Namespace) -> int:
    """One `policy` line; exit 1 when the card did not take the policy (details inside)."""
    import gpu_policy
    import policy_plan

    if args.gpu < 0:
        raise UsageError("--gpu must be >= 0")
    if args.action == "apply":
        report = gpu_policy.apply(args.state_dir, args.gpu, policy_plan.parse_policy(args.json))
    elif args.json is not None:
        raise UsageError("--json is for `policy apply` only")
    elif args.action == "read":
        report = gpu_policy.read(args.gpu)
    else:
        report = gpu_policy.restore(args.state_dir, args.gpu)
    emit(report)
    return ExitStatus.OK if report["ok"] else ExitStatus.FAILED


def command_health(args: argparse.Namespace) -> int:
    """One `health` line; exit 1 when a check found the GPU unusable (details inside)."""
    import gpu_health

    if args.gpu < 0 or (args.expect_gpus is not None and args.expect_gpus < 0) or args.smi_timeout <= 0:
        raise UsageError("--gpu and --expect-gpus must be >= 0, --smi-timeout > 0")
    report = gpu_health.collect(args.gpu, args.bus_id, args.expect_gpus, args.smi_timeout)
    emit(report)
    return ExitStatus.OK if report["ok"] else ExitStatus.FAILED


def command_lease(args: argparse.Namespace) -> int:
    import host_lease

    if args.action == "show":
        held = host_lease.read_lease(args.state_dir)
        emit({"k": "lease", "ok": True, "lease": None if held is None else host_lease.public(held),
              "expired": None if held is None else host_lease.expired(held),
              "running": host_lease.running(args.state_dir)})
        return ExitStatus.OK
    if args.action == "acquire" and not args.campaign:
        raise UsageError("lease acquire needs --campaign")
    if not args.lease_token:
        raise UsageError("lease %s needs its token on stdin (--lease-stdin)" % args.action)
    if args.action == "acquire":
        report = host_lease.acquire(args.state_dir, args.controller, args.campaign, args.pid, args.break_lease,
                                    args.lease_token, args.ttl)
    else:
        report = host_lease.release(args.state_dir, args.lease_token)
    emit(report)
    return ExitStatus.OK if report["ok"] else ExitStatus.FAILED


def dispatch(args: argparse.Namespace, cmd: List[str]) -> int:
    args.state_dir = os.path.abspath(os.path.expanduser(args.state_dir))  # the supervisor chdirs
    read_lease_token(args)
    if getattr(args, "action", None) in FENCED_ACTIONS.get(args.command or "", ()):
        _check_lease(args)
    if args.command == "facts":
        import host_facts
        import host_lease

        held = host_lease.read_lease(args.state_dir)
        emit({**host_facts.collect(), "lease": None if held is None else host_lease.public(held)})
        return ExitStatus.OK
    if args.command == "run":
        return command_run(args, cmd)
    if cmd:
        raise UsageError("unexpected arguments after --: %s" % " ".join(cmd))
    if args.command == "attach":
        import stream_follow

        if args.start_seq < 0 or args.hb <= 0:
            raise UsageError("--from must be >= 0 and --hb > 0")
        stream_follow.attach(args.state_dir, args.id, args.start_seq, args.hb, read_key(args))
        return ExitStatus.OK
    if args.command == "kill":
        import stream_follow

        _check_lease(args)
        emit(stream_follow.kill(args.state_dir, args.id))
        return ExitStatus.OK
    if args.command == "policy":
        return command_policy(args)
    if args.command == "host-debug":
        import host_debug

        report = host_debug.command(args.state_dir, args.action, args.json)
        emit(report)
        return ExitStatus.OK if report["ok"] else ExitStatus.FAILED
    if args.command == "netconsole":
        import netconsole

        report = netconsole.command(args.state_dir, args.action, args.json)
        emit(report)
        return ExitStatus.OK if report["ok"] else ExitStatus.FAILED
    if args.command == "health":
        return command_health(args)
    if args.command == "postboot":
        import docker_secrets
        import postboot

        docker_secrets.sweep(args.state_dir)  # a new boot: no supervisor of the last one will remove its file
        try:
            collected = postboot.collect(args.pstore, args.boot)
        except ValueError as exc:
            raise UsageError(str(exc))
        emit(collected)
        return ExitStatus.OK
    if args.command == "lease":
        return command_lease(args)
    if args.command == "attempts":
        import containers
        import host_lease

        emit(containers.with_containers(args.state_dir, host_lease.attempts(args.state_dir), args.running))
        return ExitStatus.OK
    if args.command == "cache":
        import cache_store

        line = cache_store.command(args)
        if line:
            emit(line)
        return ExitStatus.OK if not line.get("refused") else ExitStatus.FAILED
    if args.command == "runtime":
        import runtime_probe

        report = runtime_probe.command(args.state_dir, args.action, args.json)
        emit(report)
        return ExitStatus.OK if report.get("ok") else ExitStatus.FAILED
    if args.command == state.SUPERVISOR_ARG:
        import supervisor

        return supervisor.supervise(args.state_dir, args.id)
    raise UsageError("a subcommand is required (facts, run, attach, kill, policy, health, postboot)")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parse, dispatch, and turn every failure into one JSON error line and a status."""
    agent_args, cmd = split_command(sys.argv[1:] if argv is None else argv)
    try:
        return int(dispatch(build_parser().parse_args(agent_args), cmd))
    except StdoutClosed:
        quiet_exit_on_closed_stdout()  # the SSH session is gone; the attempt goes on
        return ExitStatus.FAILED
    except AgentFailure as exc:
        return _report(str(exc), exc.status, getattr(exc, "code", None))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the agent's own bug: say so, distinct from a PoC failure
        warn(traceback.format_exc())
        return _report("agent crashed: %s: %s" % (type(exc).__name__, exc), ExitStatus.FAILED)


def _report(message: str, status: int, code: Optional[str] = None) -> int:
    warn(message)
    try:
        emit({"k": "error", "error": message, **({"code": code} if code else {})})
    except StdoutClosed:
        quiet_exit_on_closed_stdout()
    return status


if __name__ == "__main__":
    sys.exit(main())
