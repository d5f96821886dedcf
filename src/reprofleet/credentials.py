"""Secrets for PDUs and BMCs: resolved from where the inventory says they live.

An inventory never holds a password; it names where one is kept (``env:VAR`` or
``file:/path``, a ``model.CredentialRef``). This module reads the secret at the moment a
driver needs it and wraps it in ``Secret``, whose ``repr``/``str`` are ``***``, so that a
secret that reaches an exception, a log line or a record by accident shows as ``***``.

A credential file readable by *others* (the world bits of its mode) is refused, not just
warned about: a password file any user of the controller can read is a leak, and a run
that stops at once with "chmod 600 it" is cheaper than finding out later. Group-readable
files are accepted for a PDU's or BMC's password, so a team can share one file through a
group; a PoC's secret (``env_secrets``, sent to every host) must be readable by its owner
only. No ``file:`` credential is read from where the operator's own keys live (``~/.ssh``,
``~/.gnupg``, the cloud tools' folders: :data:`FORBIDDEN_FOLDERS`), links resolved first:
a file that names one is someone trying to send that key to a host or a PDU.

A playbook asks for its secrets by name only; :func:`operator_ref` says where each one's
value comes from: ``REPROFLEET_SECRET_<NAME>`` in the environment, unless invoke.yaml's
``env_secrets`` names a source (:func:`operator_env_secrets`).

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
OPERATOR_VARIABLE_PREFIX = "REPROFLEET_SECRET_"  # a playbook's secret NAME is read from REPROFLEET_SECRET_NAME by default
# Where the operator's own keys and cloud credentials live (under the home folder): never a
# credential's file, whoever names it. ``.docker/config.json`` is one file; the rest folders.
FORBIDDEN_FOLDERS = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".config/gcloud", ".oci", ".config/gh",
                     ".password-store", ".terraform.d", ".docker/config.json", ".netrc", ".pgpass", ".git-credentials")

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


def resolve(ref: CredentialRef, *, environ: Mapping[str, str] | None = None, owner_only: bool = False) -> Secret:
    """Read the secret ``ref`` points at; errors name the reference (and where it was named),
    never the value. ``owner_only``: a file must be readable by its owner alone."""
    if ref.source == "env":
        return _from_env(ref, os.environ if environ is None else environ)
    if ref.source == "file":
        return _from_file(ref, owner_only)
    raise CredentialError(f"credential {ref}: unknown source {ref.source!r}; use one of {', '.join(SCHEMES)}")


def _from_env(ref: CredentialRef, environ: Mapping[str, str]) -> Secret:
    value = environ.get(ref.name)
    if value is None:
        raise CredentialError(f"credential {ref}: environment variable {ref.name} is not set")
    if not value:
        raise CredentialError(f"credential {ref}: environment variable {ref.name} is empty")
    return Secret(value)


def forbidden_folder(path: Path, home: Path | None = None) -> str | None:
    """The folder of the operator's own keys ``path`` is in (links resolved), or None."""
    home = (home or Path.home()).resolve()
    real = path.resolve()
    for name in FORBIDDEN_FOLDERS:
        folder = home / name
        if real == folder or real.is_relative_to(folder):
            return f"~/{name}"
    return None


def _from_file(ref: CredentialRef, owner_only: bool = False) -> Secret:
    path = Path(ref.name).expanduser()
    folder = forbidden_folder(path)
    if folder is not None:
        raise CredentialError(f"credential {ref}: is under {folder}, where the operator's own keys live: "
                              "refused (keep the secret in a file of its own)")
    try:
        info = path.stat()
    except FileNotFoundError:
        raise CredentialError(f"credential {ref}: no such file") from None
    except OSError as exc:
        raise CredentialError(f"credential {ref}: cannot stat: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise CredentialError(f"credential {ref}: not a regular file")
    others = stat.S_IRWXG | stat.S_IRWXO if owner_only else stat.S_IROTH
    if info.st_mode & others:
        who = "anyone but its owner" if owner_only else "every user"
        raise CredentialError(
            f"credential {ref}: file is readable by {who} (mode {stat.S_IMODE(info.st_mode):04o}); "
            f"run: chmod {'go' if owner_only else 'o'}-rwx {path}"
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


def resolve_env_secrets(secrets: Iterable[EnvSecret], *, environ: Mapping[str, str] | None = None) -> dict[str, Secret]:
    """A playbook's ``env_secrets``, read now: variable name -> its Secret. Errors name the
    reference and say where the operator gives one that is missing; a file must be the owner's alone."""
    found = {}
    for secret in secrets:
        try:
            found[secret.name] = resolve(secret.ref, environ=environ, owner_only=True)
        except CredentialError as exc:
            where = f"{secret.ref.where}: " if secret.ref.where else ""
            if secret.ref != operator_ref(secret.name):
                raise CredentialError(f"{where}{exc}") from None
            raise CredentialError(f"{where}{exc}: the playbook asks for secret {secret.name}; export "
                                  f"{OPERATOR_VARIABLE_PREFIX}{secret.name} or give its source in invoke.yaml "
                                  f"(reprofleet.env_secrets.{secret.name}: env:VAR or file:/path)") from None
    return found


def operator_ref(name: str, where: str = "") -> CredentialRef:
    """Where a secret a playbook asks for comes from when the operator says nothing else: its own
    prefixed variable, so a playbook can never reach the operator's other variables (AWS_...)."""
    return CredentialRef("env", f"{OPERATOR_VARIABLE_PREFIX}{name}", where)


def operator_env_secrets(secrets: Iterable[EnvSecret], given: Mapping[str, object], where: str) -> tuple[EnvSecret, ...]:
    """The playbook's secrets with the sources the operator gave (invoke.yaml's ``env_secrets``:
    NAME -> ``env:VAR`` or ``file:/path``); a name it does not give keeps :func:`operator_ref`.
    A source for a name no playbook asks is harmless: it is never read."""
    out = []
    for secret in secrets:
        value = given.get(secret.name)
        if value is None:
            out.append(secret)
            continue
        place = f"{where}:env_secrets.{secret.name}"
        if not isinstance(value, str):
            raise CredentialError(f"{place}: must be a reference, env:VARIABLE or file:/path (never the value)")
        try:
            ref = parse_credential_ref(value)
        except CredentialError as exc:
            raise CredentialError(f"{place}: {exc}") from None
        out.append(EnvSecret(secret.name, CredentialRef(ref.source, ref.name, place)))
    name_credential_variables(s.ref.name for s in out if s.ref.source == "env")
    return tuple(out)


def secret_digest(name: str, secret: Secret) -> str:
    """What a secret adds to a cell's identity when the playbook asks: a hash, never the value."""
    return hashlib.sha256(f"{name}\0{secret.reveal()}".encode()).hexdigest()[:16]
