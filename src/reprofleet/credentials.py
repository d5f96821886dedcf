"""Secrets for PDUs and BMCs: resolved from where the inventory says they live.

An inventory never holds a password; it names where one is kept (``env:VAR`` or
``file:/path``, a ``model.CredentialRef``). This module reads the secret at the moment a
driver needs it and wraps it in ``Secret``, whose ``repr``/``str`` are ``***``, so that a
secret that reaches an exception, a log line or a record by accident shows as ``***``.

A credential file readable by *others* (the world bits of its mode) is refused, not just
warned about: a password file any user of the controller can read is a leak, and a run
that stops at once with "chmod 600 it" is cheaper than finding out later. Group-readable
files are accepted, so a team can share one file through a group.

Every ``env:`` variable an inventory or a playbook names is remembered here
(:func:`name_credential_variables`), and every child process the controller starts (a
user's power command, ``ansible-inventory``, ``ssh``) gets :func:`child_environment`: the
controller's environment without any of them, so a script never inherits a secret it was
not given on purpose.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from pathlib import Path
from typing import Callable, Iterable, Mapping
from urllib.parse import quote, quote_plus

from reprofleet.errors import CredentialError
from reprofleet.model import CredentialRef, EnvSecret

SCHEMES = ("env", "file")
REDACTED = "***"

_NAMED_LOCK = threading.Lock()
_NAMED_VARIABLES: set[str] = set()  # every env: variable an inventory or playbook named, in this process


class Secret:
    """A secret string that never prints itself; ``reveal()`` is the one way out."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret({REDACTED})"

    def __str__(self) -> str:
        return REDACTED

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("a Secret cannot be pickled")


SecretResolver = Callable[[CredentialRef], Secret]


def parse_credential_ref(text: str) -> CredentialRef:
    """``env:VAR`` or ``file:/path`` -> CredentialRef; anything else is a CredentialError."""
    source, sep, name = text.partition(":")
    if not sep or source not in SCHEMES or not name.strip():
        # The text may be a literal secret pasted in by mistake: never echo it.
        raise CredentialError("a credential reference must be 'env:VARIABLE' or 'file:/path/to/file'")
    return CredentialRef(source=source, name=name.strip())


def resolve(ref: CredentialRef, *, environ: Mapping[str, str] | None = None) -> Secret:
    """Read the secret ``ref`` points at; errors name the reference, never the value."""
    if ref.source == "env":
        return _from_env(ref, os.environ if environ is None else environ)
    if ref.source == "file":
        return _from_file(ref)
    raise CredentialError(f"credential {ref}: unknown source {ref.source!r}; use one of {', '.join(SCHEMES)}")


def _from_env(ref: CredentialRef, environ: Mapping[str, str]) -> Secret:
    value = environ.get(ref.name)
    if value is None:
        raise CredentialError(f"credential {ref}: environment variable {ref.name} is not set")
    if not value:
        raise CredentialError(f"credential {ref}: environment variable {ref.name} is empty")
    return Secret(value)


def _from_file(ref: CredentialRef) -> Secret:
    path = Path(ref.name).expanduser()
    try:
        info = path.stat()
    except FileNotFoundError:
        raise CredentialError(f"credential {ref}: no such file") from None
    except OSError as exc:
        raise CredentialError(f"credential {ref}: cannot stat: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise CredentialError(f"credential {ref}: not a regular file")
    if info.st_mode & stat.S_IROTH:
        raise CredentialError(
            f"credential {ref}: file is readable by every user (mode {stat.S_IMODE(info.st_mode):04o}); "
            f"run: chmod o-rwx {path}"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CredentialError(f"credential {ref}: cannot read: {type(exc).__name__}") from None
    value = text.rstrip("\r\n")
    if not value:
        raise CredentialError(f"credential {ref}: file is empty")
    return Secret(value)


def split_user_password(secret: Secret, default_user: str) -> tuple[str, Secret]:
    """``user:password`` -> (user, password); a secret without ``:`` is a password alone."""
    user, sep, password = secret.reveal().partition(":")
    if not sep:
        return default_user, secret
    return (user or default_user), Secret(password)


def scrub(text: str, secrets: Iterable[Secret | None]) -> str:
    """Replace every secret (raw and URL-encoded) in ``text`` with ``***``.

    Defence in depth: drivers build their own messages, but a library's exception text
    (a URL with ``password=`` in its query, an echoed header) can still slip through.
    """
    for secret in secrets:
        if not secret:
            continue
        value = secret.reveal()
        for form in {value, quote(value, safe=""), quote_plus(value), quote(value)}:
            if form:
                text = text.replace(form, REDACTED)
    return text


def name_credential_variables(names: Iterable[str]) -> None:
    """Remember ``names`` as holding credentials: no child process of the controller inherits them."""
    with _NAMED_LOCK:
        _NAMED_VARIABLES.update(names)


def named_credential_variables() -> frozenset[str]:
    with _NAMED_LOCK:
        return frozenset(_NAMED_VARIABLES)


def child_environment(give: Mapping[str, str] | None = None, *,
                      environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child process: ours without every named credential variable, plus ``give``
    (what this one child is meant to have, such as a power command's own secret)."""
    named = named_credential_variables()
    source = os.environ if environ is None else environ
    return {**{k: v for k, v in source.items() if k not in named}, **(give or {})}


def resolve_env_secrets(secrets: Iterable[EnvSecret]) -> dict[str, Secret]:
    """A playbook's ``env_secrets``, read now: variable name -> its Secret. Errors name the reference."""
    return {secret.name: resolve(secret.ref) for secret in secrets}


def secret_digest(name: str, secret: Secret) -> str:
    """What a secret adds to a cell's identity when the playbook asks: a hash, never the value."""
    return hashlib.sha256(f"{name}\0{secret.reveal()}".encode()).hexdigest()[:16]
