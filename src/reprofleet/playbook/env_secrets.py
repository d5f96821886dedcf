"""``env_secrets:``: variables of the PoC's environment whose values are secrets.

Why not ``env:``: an ``env`` value is a factor, so it lands in every record, the campaign
manifest, both reports, the agent's argv on the host (``ps``) and ``docker run --env K=V``.
A token (``HF_TOKEN``) must reach the PoC and nothing else, so a playbook names where it
lives, as an inventory names a PDU password::

    env_secrets:
      HF_TOKEN: env:HF_TOKEN        # or file:~/.config/hf-token (not world-readable)
    # env_secrets_identity: true    # a hash of each value joins the cells' identity

The value is read when the campaign starts (``credentials.resolve``), sent to the agent on
stdin and put only into the PoC's environment (docker gets ``--env HF_TOKEN``, the name
alone). It joins no factor; with ``env_secrets_identity: true`` a hash of it joins each
cell's identity, so a campaign run with another token is another cell. An error never
repeats the value it read: it may be a secret pasted in by mistake.
"""

from __future__ import annotations

import re
from typing import Any

from reprofleet.credentials import name_credential_variables, parse_credential_ref
from reprofleet.errors import CredentialError
from reprofleet.model import Cell, CredentialRef, EnvSecret

from reprofleet.playbook.document import Doc

VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_secrets(doc: Doc, top: Any, cells: tuple[Cell, ...]) -> tuple[EnvSecret, ...]:
    """The playbook's ``env_secrets`` mapping, each a variable name and a credential reference."""
    block = top.get("env_secrets")
    if block is None:
        return ()
    if not isinstance(block, dict) or not block:
        raise doc.fail(top, "env_secrets", "env_secrets", "must be a mapping of VARIABLE: env:NAME or file:/path")
    found = []
    for name, value in block.items():
        path = f"env_secrets.{name}"
        if not isinstance(name, str) or not VARIABLE.fullmatch(name):
            raise doc.fail(block, name, "env_secrets", f"{name!r} is not an environment variable name")
        found.append(EnvSecret(name, _reference(doc, block, name, value, path)))
        for cell in cells:
            if name in dict(cell.env):  # a value in env: would be a factor, in every record
                raise doc.fail(block, name, path, f"{name} is also in cell {cell.name!r}'s env: a secret is "
                               "given only here")
    name_credential_variables(s.ref.name for s in found if s.ref.source == "env")
    return tuple(found)


def _reference(doc: Doc, block: Any, name: str, value: Any, path: str) -> CredentialRef:
    if not isinstance(value, str):
        raise doc.fail(block, name, path, "must be a reference, env:VARIABLE or file:/path (never the value)")
    try:
        ref = parse_credential_ref(value)
    except CredentialError as exc:
        raise doc.fail(block, name, path, str(exc)) from None
    if ref.source == "env" and not VARIABLE.fullmatch(ref.name):
        raise doc.fail(block, name, path, "'env:' needs a variable name")
    return CredentialRef(ref.source, ref.name, str(doc.at(block, name, path)))


def identity_flag(doc: Doc, top: Any) -> bool:
    value = top.get("env_secrets_identity", False)
    if not isinstance(value, bool):
        raise doc.fail(top, "env_secrets_identity", "env_secrets_identity", f"must be true or false, got {value!r}")
    if value and not top.get("env_secrets"):
        raise doc.fail(top, "env_secrets_identity", "env_secrets_identity", "there are no env_secrets to hash")
    return value
