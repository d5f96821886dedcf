"""Inventory values are data, never ssh options (issue 20, item 2).

An ``ansible_host`` or ``ansible_user`` that starts with ``-`` used to reach the system
``ssh`` argv as an option (``-oProxyCommand=...`` runs a command on the controller); ``ssh
-G`` prints the configuration ssh resolved without connecting, so it shows the injection
and its absence here with no network. The inventory refuses such values at load, and
Fabric's connections never forward the agent nor trust a ProxyJump hop blindly.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import paramiko
import pytest

from reprofleet.errors import ConnectError, HostKeyError, InventoryError
from reprofleet.inventory import load_inventory
from reprofleet.model import Host
from reprofleet.remote import transport
from reprofleet.remote.ssh import SshTarget

needs_ssh = pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the OpenSSH client")
INJECTED = "-oProxyCommand=touch reprofleet-injected"


def resolved_config(argv: list[str], *extra: str) -> tuple[int, dict[str, str], str]:
    """What ``ssh -G`` (plus ``extra`` options before ours) resolves for ``argv``; never connects."""
    done = subprocess.run(["ssh", "-G", *extra, *argv[1:]], capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)
    settings = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        settings[key] = value
    return done.returncode, settings, done.stderr


@needs_ssh
def test_without_the_double_dash_ssh_reads_an_address_as_an_option() -> None:
    # The finding, shown with the argv the project built before: the login right after the options.
    argv = SshTarget(Host("ws01", INJECTED), Path("/kh")).argv("true")
    argv.remove("--")
    _, settings, _ = resolved_config(argv)
    assert settings.get("proxycommand") == "touch reprofleet-injected"


@needs_ssh
@pytest.mark.parametrize("host", [Host("ws01", INJECTED), Host("ws01", "10.0.0.7", user=INJECTED)],
                         ids=["address", "user"])
def test_an_address_or_user_starting_with_a_dash_is_never_an_ssh_option(host: Host) -> None:
    argv = SshTarget(host, Path("/kh")).argv("true")
    assert argv[-3] == "--"
    code, settings, stderr = resolved_config(argv)
    assert "proxycommand" not in settings
    assert code != 0 and "invalid characters" in stderr  # ssh took it as a name, and refused the name


@needs_ssh
def test_the_push_pipe_forwards_no_agent_no_port_and_runs_no_local_command(tmp_path: Path) -> None:
    hostile = tmp_path / "ssh_config"  # what a user's ~/.ssh/config may say
    hostile.write_text("Host *\n  ForwardAgent yes\n  PermitLocalCommand yes\n  LocalCommand touch reprofleet-local\n"
                       "  LocalForward 8080 127.0.0.1:80\n")
    argv = SshTarget(Host("ws01", "10.0.0.7", user="lab"), Path("/kh")).argv("true")
    code, settings, stderr = resolved_config(argv, "-F", str(hostile))
    assert code == 0, stderr
    assert settings["forwardagent"] == "no"
    assert settings["permitlocalcommand"] == "no"
    assert settings["clearallforwardings"] == "yes"


def write_inventory(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("body", "field", "line"), [
    ("    ws01:\n      ansible_host: \"-oProxyCommand=touch reprofleet-injected\"\n", "ansible_host", 4),
    ("    ws01:\n      ansible_host: 10.0.0.7\n      ansible_user: \"-oProxyCommand=x\"\n", "ansible_user", 5),
    ("    ws01:\n      ansible_user: \"lab admin\"\n", "ansible_user", 4),
    ("    ws01:\n      ansible_host: \"10.0.0.7\\0\"\n", "ansible_host", 4),
    ("    ws01:\n      ansible_host: \"10.0.0.7\\e[2J\"\n", "ansible_host", 4),
    ("    \"-oProxyCommand=x\":\n      ansible_port: 22\n", "host name", 3),
    ("    \"ws 01\":\n", "host name", 3),
], ids=["address-dash", "user-dash", "user-space", "address-nul", "address-escape", "name-dash", "name-space"])
def test_an_inventory_value_that_is_not_a_plain_name_is_refused_at_load_naming_file_line_and_field(
        tmp_path: Path, body: str, field: str, line: int) -> None:
    path = write_inventory(tmp_path, "all:\n  hosts:\n" + body)
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}:{field}: ")
    assert "\n" not in message and "\0" not in message and "\x1b" not in message


def test_an_ini_host_whose_address_starts_with_a_dash_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "hosts.ini"
    path.write_text("[lab]\nws01 ansible_host=-oProxyCommand=x\n")
    with pytest.raises(InventoryError, match=r"hosts.ini:2:ansible_host: the address '-oProxyCommand=x' starts"):
        load_inventory(path)


def test_plain_names_addresses_and_users_still_load(tmp_path: Path) -> None:
    path = write_inventory(tmp_path, "all:\n  hosts:\n    ws-01.lab:\n      ansible_host: fe80::1%eth0\n"
                                     "      ansible_user: lab-admin\n")
    host = load_inventory(path).host("ws-01.lab")
    assert (host.address, host.user) == ("fe80::1%eth0", "lab-admin")


@pytest.fixture
def hostile_ssh_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ~/.ssh/config that asks for agent forwarding and a jump host (Fabric reads it)."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        "Host ws01\n  ProxyJump bastion.lab\nHost *\n  ForwardAgent yes\n")
    monkeypatch.setenv("HOME", str(home))
    known = tmp_path / "known_hosts"
    known.write_text("")
    return known


def a_key() -> paramiko.PKey:
    return paramiko.RSAKey.generate(1024)


def test_fabric_never_forwards_the_agent_even_when_the_ssh_config_says_so(hostile_ssh_config: Path) -> None:
    connection = transport._fabric_connection(Host("ws01", "ws01"), transport.TransportSettings(hostile_ssh_config))
    assert connection.forward_agent is False
    assert connection.gateway.forward_agent is False


@pytest.mark.parametrize("accept_new", [False, True], ids=["strict", "accept-new"])
def test_a_proxyjump_hop_is_checked_with_the_hosts_own_known_hosts_and_policy(
        hostile_ssh_config: Path, accept_new: bool) -> None:
    settings = transport.TransportSettings(hostile_ssh_config, accept_new_host_keys=accept_new)
    connection = transport._fabric_connection(Host("ws01", "ws01"), settings)
    hop = connection.gateway
    assert hop.host == "bastion.lab"
    policy = hop.client._policy
    key = a_key()
    if not accept_new:  # the bastion's known key is loaded, and an unknown one is refused (a reject policy of ours)
        known = a_key()
        hostile_ssh_config.write_text(f"bastion.lab {known.get_name()} {known.get_base64()}\n")
        hop = transport._fabric_connection(Host("ws01", "ws01"), settings).gateway
        assert type(hop.client._policy) is transport._RejectPolicy
        with pytest.raises(transport.UnknownHostKey):
            hop.client._policy.missing_host_key(hop.client, "bastion.lab", key)
        assert hop.client.get_host_keys().lookup("bastion.lab")[known.get_name()] == known
        return
    policy.missing_host_key(hop.client, "bastion.lab", key)  # accept-new records it where the host's keys live
    assert f"bastion.lab {key.get_name()} {key.get_base64()}" in hostile_ssh_config.read_text()
    assert hop.connect_kwargs["banner_timeout"] == settings.banner_timeout


def test_accept_new_still_refuses_a_key_marked_revoked(tmp_path: Path) -> None:
    key = a_key()
    known = tmp_path / "known_hosts"
    known.write_text(f"@revoked * {key.get_name()} {key.get_base64()}\n")
    connection = transport._fabric_connection(Host("ws09", "10.0.0.9"),
                                              transport.TransportSettings(known, accept_new_host_keys=True))
    with pytest.raises(paramiko.SSHException, match="@revoked"):
        connection.client._policy.missing_host_key(connection.client, "10.0.0.9", key)
    assert key.get_base64() not in known.read_text().split("@revoked", 1)[1].split("\n", 1)[1]


def test_without_accept_new_an_unknown_key_is_refused_with_a_type_of_ours(tmp_path: Path) -> None:
    connection = transport._fabric_connection(Host("ws09", "10.0.0.9"), transport.TransportSettings(tmp_path / "kh"))
    with pytest.raises(transport.UnknownHostKey):
        connection.client._policy.missing_host_key(connection.client, "10.0.0.9", a_key())


class _Opening:
    """A connection whose open fails with ``error`` (the seam ``connect`` translates at)."""

    gateway = None

    def __init__(self, error: Exception) -> None:
        self.error = error

    def open(self) -> None:
        raise self.error


def test_connect_decides_a_host_key_refusal_on_the_exceptions_type_never_its_words(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host, settings = Host("ws09", "10.0.0.9"), transport.TransportSettings(tmp_path / "kh")
    for error, refused in ((transport.UnknownHostKey("no key on file for 10.0.0.9"), HostKeyError),
                           (transport.RevokedHostKey("a key a person withdrew"), HostKeyError),
                           # a server's own words may say anything: a broken banner is no host-key refusal
                           (paramiko.SSHException("Error reading SSH protocol banner: @revoked, not found in "
                                                  "known_hosts"), ConnectError)):
        monkeypatch.setattr(transport, "_fabric_connection", lambda _h, _s, e=error: _Opening(e))
        with pytest.raises(ConnectError) as raised:
            transport.connect(host, settings)
        assert type(raised.value) is refused, error
