"""Secrets in the environment of the PoC, and nowhere else (issue 20, item 4).

``env:`` values are factors: they land in every record, campaign.json, both reports, the
agent's argv on the host (``ps``), its meta.json and ``docker run --env K=V``. A playbook's
``env_secrets`` asks for a token by name (where it lives is the operator's to say: issue 34
item 3); its value goes from the controller to the agent on stdin, from the agent to its
supervisor through a pipe, and into the PoC's environment.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from reprofleet.credentials import Secret, resolve_env_secrets, secret_digest
from reprofleet.errors import CredentialError, PlaybookError
from reprofleet.model import CredentialRef, EnvSecret, Host, Runtime, RuntimeKind
from reprofleet.playbook import load_playbook
from reprofleet.remote.agent import AgentBundle, AgentClient
from reprofleet.runner import poc
from reprofleet.runner.context import cell_identity, identity_factors
from reprofleet.campaign.preflight import check_playbook_against_hosts

from tests.support import agent_harness as h

TOKEN = "hf_s3cretTOKENvalue-4711"


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "poc.py").write_text("")
    path = tmp_path / "campaign.yml"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


@pytest.mark.parametrize("block", ["env_secrets: [HF_TOKEN]", "env_secrets:\n  HF_TOKEN: env:HF_TOKEN"],
                         ids=["list", "older-mapping"])
def test_env_secrets_ask_for_a_name_whose_source_is_the_operators_and_join_no_factor(
        tmp_path: Path, block: str) -> None:
    book = load_playbook(write(tmp_path, "name: s\npoc: {script: poc.py}\nattempts: 1\n" + block + "\n"
                               'matrix: [{name: only, env: {HF_HUB_OFFLINE: "1"}}]\n'))
    assert book.env_secrets == (EnvSecret("HF_TOKEN", CredentialRef("env", "REPROFLEET_SECRET_HF_TOKEN")),)
    assert book.env_secrets_identity is False
    assert "HF_TOKEN" not in json.dumps(dict(book.cells[0].factors))


@pytest.mark.parametrize(("block", "line", "field", "words"), [
    ("env_secrets:\n  HF_TOKEN: hf_pasted_value\n", 4, "env_secrets.HF_TOKEN", "a credential reference must be"),
    ("env_secrets:\n  HF_TOKEN: 12\n", 4, "env_secrets.HF_TOKEN", "must be a reference"),
    ("env_secrets:\n  2BAD: env:X\n", 4, "env_secrets", "is not an environment variable name"),
    ("env_secrets: HF_TOKEN\n", 3, "env_secrets", "must be a list of variable names"),
    ("env_secrets: [HF_TOKEN, 2BAD]\n", 3, "env_secrets[1]", "is not an environment variable name"),
    ("env_secrets:\n  HF_TOKEN: file:~/.ssh/id_ed25519\n", 4, "env_secrets.HF_TOKEN",
     "a playbook cannot say where a secret lives"),
    ("env_secrets:\n  HF_TOKEN: env:AWS_SECRET_ACCESS_KEY\n", 4, "env_secrets.HF_TOKEN",
     "a playbook cannot say where a secret lives"),
    ("env_secrets_identity: true\n", 3, "env_secrets_identity", "no env_secrets to hash"),
], ids=["literal-value", "number", "bad-name", "text", "bad-name-in-list", "file-source", "other-variable",
        "identity-alone"])
def test_a_bad_env_secret_is_one_line_naming_file_line_and_field_and_never_the_value(
        tmp_path: Path, block: str, line: int, field: str, words: str) -> None:
    path = write(tmp_path, "name: s\npoc: {script: poc.py}\n" + block + "attempts: 1\nmatrix: [{name: only}]\n")
    with pytest.raises(PlaybookError) as caught:
        load_playbook(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}:{field}: ") and words in message
    assert "hf_pasted_value" not in message and "\n" not in message


def test_a_secret_also_given_in_a_cells_env_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, """
        name: s
        poc: {script: poc.py}
        attempts: 1
        env_secrets: {HF_TOKEN: env:HF_TOKEN}
        matrix: [{name: only, env: {HF_TOKEN: "x"}}]
    """)
    with pytest.raises(PlaybookError, match=r"campaign.yml:4:env_secrets.HF_TOKEN: HF_TOKEN is also in cell 'only'"):
        load_playbook(path)


def test_an_unset_secret_stops_the_preflight_naming_where_it_was_asked_and_where_to_give_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPROFLEET_SECRET_HF_TOKEN", raising=False)
    path = write(tmp_path, """
        name: s
        poc: {script: poc.py}
        attempts: 1
        env_secrets: [HF_TOKEN]
        matrix: [{name: only}]
    """)
    with pytest.raises(CredentialError) as caught:
        check_playbook_against_hosts(load_playbook(path), (Host("ws01", "10.0.0.1"),), tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{path}:4:env_secrets[0]: credential env:REPROFLEET_SECRET_HF_TOKEN: ")
    assert "is not set" in message and "reprofleet.env_secrets.HF_TOKEN" in message and "\n" not in message


def test_the_operator_names_a_secrets_source_in_invoke_yaml_and_a_file_must_be_the_owners_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from reprofleet.campaign.settings import ControllerConfig

    monkeypatch.setenv("RF_TEST_MY_TOKEN", TOKEN)
    book = load_playbook(write(tmp_path, "name: s\npoc: {script: poc.py}\nattempts: 1\nenv_secrets: [HF_TOKEN]\n"
                                         "matrix: [{name: only}]\n"))
    given = ControllerConfig({"env_secrets": {"HF_TOKEN": "env:RF_TEST_MY_TOKEN"}}).env_secrets(book.env_secrets)
    assert given[0].ref == CredentialRef("env", "RF_TEST_MY_TOKEN")
    assert resolve_env_secrets(given)["HF_TOKEN"].reveal() == TOKEN
    token_file = tmp_path / "hf-token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o640)  # group-readable: fine for a PDU password, not for a secret sent to every host
    given = ControllerConfig({"env_secrets": {"HF_TOKEN": f"file:{token_file}"}}).env_secrets(book.env_secrets)
    with pytest.raises(CredentialError, match=r"^invoke.yaml reprofleet:env_secrets.HF_TOKEN: credential file:.*"
                                              r"readable by anyone but its owner \(mode 0640\); run: chmod go-rwx"):
        resolve_env_secrets(given)
    token_file.chmod(0o600)
    assert resolve_env_secrets(given)["HF_TOKEN"].reveal() == TOKEN


def docker_cell() -> Any:
    from reprofleet.model import Cell
    return Cell(name="c", index=0, factors={}, env=(("HF_HUB_OFFLINE", "1"),),
                runtime=Runtime(RuntimeKind.DOCKER, image="vllm/vllm-openai:v0.25.1"))


def test_docker_is_given_the_secrets_name_alone_and_copies_the_value_from_its_environment() -> None:
    command = poc.build(docker_cell(), poc_path="/p.py", state_root="/s", attempt_id="a1", persistent=True, gpu=0,
                        secret_names=("HF_TOKEN",))
    argv = list(command.argv)
    at = argv.index("HF_TOKEN")
    assert argv[at - 1] == "--env" and "HF_HUB_OFFLINE=1" in argv
    assert command.secret_names == ("HF_TOKEN",)


def test_a_hash_of_the_secret_joins_the_cell_identity_only_when_the_playbook_asks() -> None:
    cell = docker_cell()
    one, other = secret_digest("HF_TOKEN", Secret(TOKEN)), secret_digest("HF_TOKEN", Secret("hf_other"))
    assert cell_identity(cell, "poc") == cell_identity(cell, "poc", {})  # not asked: the token changes nothing
    assert cell_identity(cell, "poc", {"HF_TOKEN": one}) != cell_identity(cell, "poc", {"HF_TOKEN": other})
    assert TOKEN not in json.dumps(identity_factors(cell, {"HF_TOKEN": one}))
    assert "env_secrets" not in cell.factors  # the record's factors stay the cell's own


class RecordingSession:
    """What AgentClient.run hands the transport: the command line and what goes to its stdin."""

    def __init__(self) -> None:
        self.host = Host("ws01", "10.0.0.1")
        self.calls: list[tuple[str, bytes | None]] = []

    def stream(self, command: str, stdin: bytes | None = None) -> Any:
        self.calls.append((command, stdin))
        return None


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "state"
    for pid_file in (tmp_path / "state" / "attempts").glob("*/supervisor.pid"):
        pid = int(pid_file.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline")
        if cmdline.exists() and b"_supervise" in cmdline.read_bytes():
            os.kill(pid, 9)


def all_command_lines() -> list[bytes]:
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines.append((entry / "cmdline").read_bytes())
            except OSError:
                continue
    return lines


def test_the_secret_reaches_the_poc_environment_through_stdin_and_no_argv_file_or_meta(state_dir: Path) -> None:
    session = RecordingSession()
    client = AgentClient(session, AgentBundle((), "0" * 12))  # type: ignore[arg-type]
    wanted = hashlib.sha256(TOKEN.encode()).hexdigest()
    script = (f'[ "$(printf %s "$HF_TOKEN" | sha256sum | cut -c1-64)" = {wanted} ] && echo has-token; '
              "echo ready; sleep 1.5")
    client.run("s1", ["sh", "-c", script], timeout=30, env={"HF_HUB_OFFLINE": "1"},
               secrets={"HF_TOKEN": Secret(TOKEN)})
    command, stdin = session.calls[0]
    assert TOKEN not in command and "--secrets-stdin" in shlex.split(command)
    assert stdin is not None and json.loads(stdin) == {"HF_TOKEN": TOKEN}
    # The same command and stdin, run by the real agent on this machine (no SSH between them).
    words = shlex.split(command)
    args = words[words.index("run"):]
    agent = subprocess.Popen(h.agent_argv(state_dir, *args), env=h.agent_env(), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert agent.stdin is not None and agent.stdout is not None
    agent.stdin.write(stdin)
    agent.stdin.close()
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(e.get("line") == "ready" for e in seen):
        raw = agent.stdout.readline()
        assert raw, agent.stderr.read() if agent.stderr else b""
        seen.append(json.loads(raw))
    during = all_command_lines()  # every process on this machine, while the PoC runs
    agent.stdout.read()  # to the exit line: the stream ends when the PoC has
    agent.wait(timeout=20)
    lines = [e.get("line") for e in seen]
    assert "has-token" in lines  # the PoC had it
    assert not any(TOKEN.encode() in line for line in during)
    kept = [p for p in state_dir.rglob("*") if p.is_file()]
    assert kept and not any(TOKEN.encode() in p.read_bytes() for p in kept)
    meta = json.loads(next(state_dir.rglob("meta.json")).read_text())
    assert meta["secret_env"] == ["HF_TOKEN"] and "HF_TOKEN" not in meta["env"]


def test_the_agent_refuses_secrets_that_are_not_a_json_object_of_names(state_dir: Path) -> None:
    for given in (b"hf_raw_value\n", b'{"2BAD": "x"}\n', b'["x"]\n'):
        done = subprocess.run(h.agent_argv(state_dir, "run", "--id", "r1", "--timeout", "5", "--secrets-stdin",
                                           "--", "true"), env=h.agent_env(), input=given, capture_output=True,
                              timeout=30)
        assert done.returncode == 2 and b"hf_raw_value" not in done.stdout + done.stderr
        assert not (state_dir / "attempts" / "r1").exists()


# -- child processes of the controller inherit no named credential -------------------------------

def fake_tool(folder: Path, name: str, prints: str = "") -> Path:
    """An executable ``name`` that writes its environment to ``name.env`` beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / name
    tool.write_text(f"#!/bin/sh\nenv > {folder / (name + '.env')}\n{prints}\n")
    tool.chmod(0o755)
    return folder / (name + ".env")


@pytest.fixture
def named_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An inventory naming two PDU passwords and a playbook naming a token, all three set."""
    for name, value in (("RF_T_PDU_A", "pdu-a-s3cret"), ("RF_T_PDU_B", "pdu-b-s3cret"),
                        ("REPROFLEET_SECRET_HF_TOKEN", TOKEN)):
        monkeypatch.setenv(name, value)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(textwrap.dedent(f"""
        all:
          hosts:
            ws01:
              pdu: {{driver: command, address: local, outlet: 1, credentials: env:RF_T_PDU_A,
                    on_command: "env > {tmp_path / 'power.env'}", off_command: "true"}}
            ws02:
              pdu: {{driver: tasmota, address: 10.0.0.42, credentials: env:RF_T_PDU_B}}
    """))
    load_playbook(write(tmp_path, """
        name: s
        poc: {script: poc.py}
        attempts: 1
        env_secrets: [HF_TOKEN]
        matrix: [{name: only}]
    """))
    return inventory


def assert_no_named_secret(env_file: Path) -> None:
    text = env_file.read_text()
    for leaked in ("RF_T_PDU_A", "RF_T_PDU_B", "REPROFLEET_SECRET_HF_TOKEN", "pdu-b-s3cret", TOKEN):
        assert leaked not in text


def test_a_power_command_gets_its_own_secret_and_no_other_named_credential(named_secrets: Path,
                                                                          tmp_path: Path) -> None:
    from reprofleet.inventory import load_inventory
    from reprofleet.power import PowerLog, driver_for

    port = load_inventory(named_secrets).host("ws01").pdu
    assert port is not None
    driver_for(port, "ws01", PowerLog(None)).on()
    assert "REPROFLEET_POWER_SECRET=pdu-a-s3cret" in (tmp_path / "power.env").read_text()
    assert_no_named_secret(tmp_path / "power.env")


def test_an_ansible_inventory_script_inherits_no_named_credential(named_secrets: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from reprofleet.inventory import load_inventory
    from reprofleet.inventory.listing import ansible_list

    load_inventory(named_secrets)
    seen = fake_tool(tmp_path / "bin", "ansible-inventory", "echo '{\"_meta\": {\"hostvars\": {}}}'")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    ansible_list(str(tmp_path / "dynamic.py"), 10.0)
    assert_no_named_secret(seen)


def test_the_ssh_push_pipe_inherits_no_named_credential(named_secrets: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from reprofleet.inventory import load_inventory
    from reprofleet.remote.ssh import SshExec, SshTarget

    load_inventory(named_secrets)
    seen = fake_tool(tmp_path / "bin", "ssh")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    SshExec(SshTarget(Host("ws01", "10.0.0.1"), tmp_path / "kh"), "true").finish(10.0)
    assert_no_named_secret(seen)


@pytest.mark.parametrize("address", ["http://10.0.0.5/cm?user=admin&password=pw-in-url", "10.0.0.5#pw-in-url"],
                         ids=["query", "fragment"])
def test_a_power_address_with_a_query_string_or_fragment_is_refused_without_echoing_it(
        tmp_path: Path, address: str) -> None:
    from reprofleet.errors import InventoryError
    from reprofleet.inventory import load_inventory

    inventory = tmp_path / "hosts.yml"
    inventory.write_text(f"all:\n  hosts:\n    ws01:\n      pdu:\n        driver: tasmota\n        address: {address}\n")
    with pytest.raises(InventoryError) as caught:
        load_inventory(inventory)
    assert str(caught.value).startswith(f"{inventory}:6:pdu.address: the address has a query string or fragment")
    assert "pw-in-url" not in str(caught.value)


def test_the_runner_gives_each_attempt_the_secrets_by_value_to_the_agent_and_by_name_to_its_command(
        tmp_path: Path) -> None:
    from reprofleet.clock import VirtualClock
    from reprofleet.records.identity import cell_id
    from tests.support.seam_host import FakeHost, records, run_host, seam_book, seam_context

    clock = VirtualClock()
    fake = FakeHost(clock, "ws01", script=("clean",))
    book = seam_book(tmp_path, attempts=1, env_secrets=(EnvSecret("HF_TOKEN", CredentialRef("env", "X")),),
                     env_secrets_identity=True)
    ctx = seam_context(book, tmp_path, clock)
    digests = {"HF_TOKEN": secret_digest("HF_TOKEN", Secret(TOKEN))}
    ctx.env_secrets, ctx.secret_digests = {"HF_TOKEN": Secret(TOKEN)}, digests
    run_host(fake, ctx)
    (record,) = records(ctx)
    argv, env, given = fake.runs[record["attempt"]]
    assert {name: value.reveal() for name, value in given.items()} == {"HF_TOKEN": TOKEN}
    assert TOKEN not in json.dumps([argv, env]) and "HF_TOKEN" in argv  # docker: --env HF_TOKEN, the name alone
    cell = book.cells[0]
    assert record["cell_id"] == cell_id(cell.name, identity_factors(cell, digests), record["runtime"], record["poc"])
    assert record["cell_id"] != cell_id(cell.name, dict(cell.factors), record["runtime"], record["poc"])
    assert "env_secrets" not in record["factors"] and TOKEN not in json.dumps(record)
