"""The ssh command line a cache push streams its objects through: the inventory's key and
port, the campaign's known_hosts, strict host keys, never a prompt."""

from __future__ import annotations

from pathlib import Path

from reprofleet.model import Host
from reprofleet.remote.ssh import SshTarget


def test_the_push_pipe_uses_the_inventorys_key_port_user_and_the_campaigns_known_hosts() -> None:
    host = Host("h1", "10.0.0.7", port=2222, user="lab", key_file="/keys/lab")
    argv = SshTarget(host, Path("/kh/known_hosts"), connect_timeout=7).argv("python3 agent.py cache receive")
    joined = " ".join(argv)
    assert argv[0] == "ssh" and argv[-2:] == ["lab@10.0.0.7", "python3 agent.py cache receive"]
    for option in ("BatchMode=yes", "StrictHostKeyChecking=yes", "UserKnownHostsFile=/kh/known_hosts",
                   "GlobalKnownHostsFile=/dev/null", "ConnectTimeout=7", "IdentitiesOnly=yes"):
        assert f"-o {option}" in joined
    assert "-p 2222" in joined and "-i /keys/lab" in joined


def test_without_a_key_or_user_ssh_picks_its_own_defaults() -> None:
    argv = SshTarget(Host("h2", "host2"), Path("/kh")).argv("true")
    assert "-i" not in argv and argv[-2] == "host2"
