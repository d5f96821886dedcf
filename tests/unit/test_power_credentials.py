"""Credential references resolve to secrets that never print themselves."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reprofleet.credentials import Secret, parse_credential_ref, resolve, scrub, split_user_password
from reprofleet.errors import CredentialError
from reprofleet.model import CredentialRef

SECRET = "hunter2-Ü&%/x"


def test_an_env_reference_resolves_to_the_variables_value() -> None:
    secret = resolve(CredentialRef("env", "PDU_PASS"), environ={"PDU_PASS": SECRET})
    assert secret.reveal() == SECRET


def test_a_missing_env_variable_is_named_in_the_error() -> None:
    with pytest.raises(CredentialError, match="env:PDU_PASS: environment variable PDU_PASS is not set"):
        resolve(CredentialRef("env", "PDU_PASS"), environ={})


def test_an_empty_env_variable_is_refused() -> None:
    with pytest.raises(CredentialError, match="is empty"):
        resolve(CredentialRef("env", "PDU_PASS"), environ={"PDU_PASS": ""})


def test_a_file_reference_expands_home_and_drops_the_final_newline(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "bmc").write_text(SECRET + "\n")
    (tmp_path / "bmc").chmod(0o640)
    assert resolve(CredentialRef("file", "~/bmc")).reveal() == SECRET


def test_a_world_readable_secret_file_is_refused_without_showing_its_content(tmp_path: Path) -> None:
    path = tmp_path / "bmc"
    path.write_text(SECRET)
    path.chmod(0o644)
    with pytest.raises(CredentialError, match="readable by every user") as caught:
        resolve(CredentialRef("file", str(path)))
    assert SECRET not in str(caught.value)
    assert "chmod o-rwx" in str(caught.value)


def test_a_missing_or_empty_secret_file_is_an_error_naming_the_reference(tmp_path: Path) -> None:
    with pytest.raises(CredentialError, match=f"file:{tmp_path}/nope: no such file"):
        resolve(CredentialRef("file", str(tmp_path / "nope")))
    empty = tmp_path / "empty"
    empty.write_text("\n")
    empty.chmod(0o600)
    with pytest.raises(CredentialError, match="is empty"):
        resolve(CredentialRef("file", str(empty)))


def test_a_directory_is_not_a_secret_file(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o700)
    with pytest.raises(CredentialError, match="not a regular file"):
        resolve(CredentialRef("file", str(tmp_path)))


def test_an_unknown_scheme_is_refused_without_echoing_what_may_be_a_password() -> None:
    with pytest.raises(CredentialError) as caught:
        parse_credential_ref("hunter2")
    assert "hunter2" not in str(caught.value)
    assert parse_credential_ref("env:BMC") == CredentialRef("env", "BMC")
    assert parse_credential_ref("file:/etc/x") == CredentialRef("file", "/etc/x")
    with pytest.raises(CredentialError):
        resolve(CredentialRef("vault", "x"))


def test_a_secret_never_prints_itself() -> None:
    secret = Secret(SECRET)
    assert repr(secret) == "Secret(***)"
    assert str(secret) == "***"
    assert SECRET not in f"{secret} {secret!r} {[secret]} {dict(a=secret)}"


def test_user_and_password_split_at_the_first_colon() -> None:
    user, password = split_user_password(Secret("root:pa:ss"), "admin")
    assert (user, password.reveal()) == ("root", "pa:ss")
    user, password = split_user_password(Secret("only-password"), "admin")
    assert (user, password.reveal()) == ("admin", "only-password")


def test_scrub_removes_raw_and_url_encoded_secrets() -> None:
    text = f"GET /cm?user=admin&password=hunter2-%C3%9C%26%25%2Fx failed; {SECRET}"
    cleaned = scrub(text, [Secret(SECRET), None])
    assert SECRET not in cleaned
    assert "hunter2" not in cleaned
    assert cleaned.count("***") == 2
