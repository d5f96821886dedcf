"""Where notices go: invoke.yaml's ``notify:`` section, read once, checked before anything runs.

    reprofleet:
      notify:
        urls:                      # Apprise URLs (Slack, Matrix, ntfy, email, Discord ...);
          - "ntfys://{env:NTFY_TOKEN}@ntfy.sh/lab-gpus"   # a secret only as {env:VAR} or {file:/path}
        command: notify-lab        # and/or a program: the notice as JSON on stdin
        kinds: [campaign_finished, host_quarantined, needs_person, first_reproduction]
        timeout_s: 30              # the command's deadline

Apprise (the ``notify`` extra) speaks to every service through one well-kept library; the
command covers whatever it does not. A URL's secret is written as a reference, resolved
through ``reprofleet.credentials`` like a PDU's password (``file:`` refused when every user
can read it), held as a ``Secret`` and scrubbed from every failure message.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from reprofleet.campaign.notify import Notice, NoticeKind, Send
from reprofleet.credentials import Secret, child_environment, parse_credential_ref, resolve, scrub
from reprofleet.errors import InputError, Location, ReprofleetError

KEYS = ("urls", "command", "kinds", "timeout_s")
REFERENCE = re.compile(r"\{((?:env|file):[^{}]+)\}")


class NotifyError(ReprofleetError):
    """A notice could not be sent (its message names no secret)."""


@dataclass(frozen=True)
class NotifySettings:
    """What ``notify:`` says, secrets still as references."""

    urls: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    kinds: frozenset[NoticeKind] = frozenset(NoticeKind)
    timeout_s: float = 30.0

    @property
    def enabled(self) -> bool:
        return bool(self.urls or self.command)


def _bad(field: str, message: str, where: str) -> InputError:
    return InputError(Location(where, None, f"notify.{field}"), message)


def parse_settings(section: Mapping[str, Any] | None, where: str = "invoke.yaml") -> NotifySettings:
    """``notify:`` (None or empty: nothing is sent) -> settings; each mistake is one line naming its key."""
    section = dict(section or {})
    for key in section:
        if key not in KEYS:
            raise _bad(str(key), f"unknown key; notify takes {', '.join(KEYS)}", where)
    urls = section.get("urls") or []
    if isinstance(urls, str):
        urls = [urls]
    if not isinstance(urls, (list, tuple)) or not all(isinstance(u, str) and u.strip() for u in urls):
        raise _bad("urls", "a list of Apprise URLs (strings)", where)
    command = section.get("command") or []
    argv = shlex.split(command) if isinstance(command, str) else command
    if not isinstance(argv, (list, tuple)) or not all(isinstance(a, str) for a in argv):
        raise _bad("command", "a command line (a string, or a list of words)", where)
    if argv and shutil.which(argv[0]) is None:
        raise _bad("command", f"{argv[0]}: no such program (not a file, nor on PATH)", where)
    kinds_given = section.get("kinds")
    try:
        kinds = frozenset(NoticeKind(k) for k in kinds_given) if kinds_given is not None else frozenset(NoticeKind)
    except (ValueError, TypeError):
        raise _bad("kinds", f"a list of {', '.join(k.value for k in NoticeKind)}", where) from None
    try:
        timeout = float(section.get("timeout_s", 30.0))
    except (TypeError, ValueError):
        raise _bad("timeout_s", f"a number of seconds, not {section.get('timeout_s')!r}", where) from None
    if not timeout > 0:
        raise _bad("timeout_s", "must be more than 0", where)
    return NotifySettings(tuple(u.strip() for u in urls), tuple(argv), kinds, timeout)


def resolve_url(template: str) -> tuple[Secret, tuple[Secret, ...]]:
    """A URL with every ``{env:VAR}``/``{file:/path}`` filled in, and the secrets it holds."""
    secrets: list[Secret] = []

    def fill(match: re.Match[str]) -> str:
        secret = resolve(parse_credential_ref(match.group(1)))
        secrets.append(secret)
        return secret.reveal()

    return Secret(REFERENCE.sub(fill, template)), tuple(secrets)


def scheme_of(template: str) -> str:
    """What a URL is, for a message: its scheme only (a literal secret may follow it)."""
    return template.split("://", 1)[0] + "://..." if "://" in template else "(no scheme)"


class AppriseSender:
    """Every URL through one ``apprise.Apprise``; a failed delivery raises with Apprise's words."""

    def __init__(self, templates: Sequence[str], where: str = "invoke.yaml") -> None:
        try:
            import apprise
        except ImportError:
            raise _bad("urls", "Apprise is not installed: pip install 'reprofleet[notify]'", where) from None
        self._apprise, self._log_capture = apprise.Apprise(), apprise.LogCapture
        self.secrets: list[Secret] = []
        for index, template in enumerate(templates):
            url, secrets = resolve_url(template)
            self.secrets += secrets
            if not self._apprise.add(url.reveal()):
                raise _bad(f"urls[{index}]", f"Apprise does not understand this {scheme_of(template)} URL", where)

    def __call__(self, notice: Notice) -> None:
        import logging

        with self._log_capture(level=logging.WARNING) as said:
            sent = self._apprise.notify(title=notice.title, body=notice.body)
        if not sent:
            words = " ".join(said.getvalue().split())[-500:] or "no reason given"
            raise NotifyError(scrub(f"apprise: {words}", self.secrets))


class CommandSender:
    """A program of the user's: the notice as JSON on stdin, and in REPROFLEET_NOTICE_* variables."""

    def __init__(self, argv: Sequence[str], timeout_s: float) -> None:
        self.argv, self.timeout_s = tuple(argv), timeout_s

    def __call__(self, notice: Notice) -> None:
        # the scrubbed environment: a BMC password or a PoC's token in a named variable is not the notifier's
        env = child_environment({"REPROFLEET_NOTICE_KIND": notice.kind.value, "REPROFLEET_NOTICE_TITLE": notice.title,
                                 "REPROFLEET_NOTICE_HOST": notice.host, "REPROFLEET_NOTICE_CELL": notice.cell})
        try:
            done = subprocess.run(self.argv, input=json.dumps(notice.to_json()), text=True, capture_output=True,
                                  timeout=self.timeout_s, env=env, check=False)
        except subprocess.TimeoutExpired:
            raise NotifyError(f"{self.argv[0]}: no exit within {self.timeout_s:g} s (killed)") from None
        except OSError as exc:
            raise NotifyError(f"{self.argv[0]}: cannot run: {exc.strerror}") from None
        if done.returncode != 0:
            tail = " ".join((done.stderr or "").split())[-300:]
            raise NotifyError(f"{self.argv[0]} exited {done.returncode}" + (f": {tail}" if tail else ""))


class Senders:
    """Every configured sink; one that fails never keeps the notice from the others."""

    def __init__(self, sinks: Sequence[Send]) -> None:
        self.sinks = tuple(sinks)

    def __call__(self, notice: Notice) -> None:
        failures = []
        for sink in self.sinks:
            try:
                sink(notice)
            except Exception as exc:  # noqa: BLE001 - each sink on its own
                failures.append(f"{type(sink).__name__}: {exc}")
        if failures:
            raise NotifyError("; ".join(failures))


def build_send(settings: NotifySettings, where: str = "invoke.yaml") -> Send:
    """The sender ``settings`` describe; every secret resolved now, so a missing one stops the
    campaign before it starts, not at 3 a.m."""
    sinks: list[Send] = []
    if settings.urls:
        sinks.append(AppriseSender(settings.urls, where))
    if settings.command:
        sinks.append(CommandSender(settings.command, settings.timeout_s))
    return Senders(sinks)
