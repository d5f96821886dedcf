"""``env_secrets:``: variables of the PoC's environment whose values are secrets.

Why not ``env:``: an ``env`` value is a factor, so it lands in every record, the campaign
manifest, both reports, the agent's argv on the host (``ps``) and ``docker run --env K=V``.
A token (``HF_TOKEN``) must reach the PoC and nothing else.

A playbook only *asks* for a secret by its variable's name; where the value lives is the
operator's to say, never the playbook's (a shared playbook naming ``file:~/.ssh/id_ed25519``
or ``env:AWS_SECRET_ACCESS_KEY`` would send the operator's key to every host)::

    env_secrets: [HF_TOKEN]         # the playbook
    # env_secrets_identity: true    # a hash of each value joins the cells' identity

The operator gives it in invoke.yaml (``reprofleet.env_secrets: {HF_TOKEN: env:MY_HF_TOKEN}``
or ``file:~/.config/hf-token``, owner-only) or exports ``REPROFLEET_SECRET_HF_TOKEN``
(``credentials.operator_env_secrets``). The older form ``HF_TOKEN: env:HF_TOKEN`` is read as
asking for ``HF_TOKEN`` (its source is the operator's as above); a playbook that names any
other source (``file:``, or another variable) is refused at its line.

The value is read when the campaign starts (``credentials.resolve``), sent to the agent on
stdin and put only into the PoC's environment (docker gets ``--env HF_TOKEN``, the name
alone). It joins no factor; with ``env_secrets_identity: true`` a hash of it joins each
cell's identity, so a campaign run with another token is another cell. An error never
repeats the value it read: it may be a secret pasted in by mistake.
"""

from __future__ import annotations

import re
from typing import Any

from reprofleet.credentials import OPERATOR_VARIABLE_PREFIX, name_credential_variables, operator_ref, parse_credential_ref
from reprofleet.errors import CredentialError
from reprofleet.model import Cell, EnvSecret

from reprofleet.playbook.document import Doc

VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_secrets(doc: Doc, top: Any, cells: tuple[Cell, ...]) -> tuple[EnvSecret, ...]:
    """The secrets the playbook asks for, by name; each one's source is the operator's
    (``credentials.operator_ref``: ``REPROFLEET_SECRET_<NAME>`` until invoke.yaml says otherwise)."""
    block = top.get("env_secrets")
    if block is None:
        return ()
    asked: list[tuple[Any, Any, Any, str]]  # (name, the list or mapping holding it, its key there, field)
    if isinstance(block, list) and block:
        asked = [(name, block, index, f"env_secrets[{index}]") for index, name in enumerate(block)]
    elif isinstance(block, dict) and block:
        asked = [(name, block, name, f"env_secrets.{name}") for name in block]
    else:
        raise doc.fail(top, "env_secrets", "env_secrets", "must be a list of variable names: [HF_TOKEN, ...]")
    found: list[EnvSecret] = []
    for name, holder, key, path in asked:
        if not isinstance(name, str) or not VARIABLE.fullmatch(name):
            raise doc.fail(holder, key, path if isinstance(holder, list) else "env_secrets",
                           f"{name!r} is not an environment variable name")
        if isinstance(holder, dict):
            _older_form(doc, holder, name, holder[name], path)
        if name in (s.name for s in found):
            raise doc.fail(holder, key, path, f"{name} is asked for twice")
        for cell in cells:
            if name in dict(cell.env):  # a value in env: would be a factor, in every record
                raise doc.fail(holder, key, path, f"{name} is also in cell {cell.name!r}'s env: a secret is "
                               "given only here")
        found.append(EnvSecret(name, operator_ref(name, str(doc.at(holder, key, path)))))
    name_credential_variables(s.ref.name for s in found)
    return tuple(found)


def _older_form(doc: Doc, block: Any, name: str, value: Any, path: str) -> None:
    """``HF_TOKEN: env:HF_TOKEN`` asks for HF_TOKEN as the list form does; any other value
    names a source, which only the operator may: refused (never echoing it: it may be a secret)."""
    if not isinstance(value, str):
        raise doc.fail(block, name, path, "must be a reference, env:VARIABLE or file:/path (never the value)")
    try:
        ref = parse_credential_ref(value)
    except CredentialError as exc:
        raise doc.fail(block, name, path, str(exc)) from None
    if ref.source != "env" or ref.name != name:
        raise doc.fail(block, name, path, "a playbook cannot say where a secret lives: write "
                       f"'env_secrets: [{name}]' and give its source in invoke.yaml "
                       f"(reprofleet.env_secrets.{name}: env:VAR or file:/path) or export {OPERATOR_VARIABLE_PREFIX}{name}")


def identity_flag(doc: Doc, top: Any) -> bool:
    value = top.get("env_secrets_identity", False)
    if not isinstance(value, bool):
        raise doc.fail(top, "env_secrets_identity", "env_secrets_identity", f"must be true or false, got {value!r}")
    if value and not top.get("env_secrets"):
        raise doc.fail(top, "env_secrets_identity", "env_secrets_identity", "there are no env_secrets to hash")
    return value
