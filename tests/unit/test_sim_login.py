"""A simulated host can log in as a user of its own (SimHostSpec.login_user), with the sudo
rights its spec gives: what the host's tree, sshd config, boot script and inventory say, and
that a root-login host (every host before this existed) is built exactly as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reprofleet.sim import hostfs
from reprofleet.sim.host import SimHost
from reprofleet.sim.inventory_file import inventory_data
from reprofleet.sim.layout import FleetPaths, HostPaths
from reprofleet.sim.manifest import HostRecord
from reprofleet.sim.spec import SimHostSpec

DIST = Path("/usr/local/lib/python3.11/dist-packages")


def _tree(tmp_path: Path, login_user: str) -> HostPaths:
    keys = tmp_path / "authorized_keys"
    keys.write_text("ssh-ed25519 AAAA fleet\n")
    paths = HostPaths(tmp_path / "hosts" / "h1")
    hostfs.make_host_tree(paths, True, login_user, keys)
    return paths


@pytest.mark.skipif(os.geteuid() != 0, reason="the login's home is chowned to its uid")
def test_a_lab_login_gets_its_users_its_home_its_key_and_the_sudo_broker(tmp_path: Path) -> None:
    paths = _tree(tmp_path, "lab")
    passwd = (paths.root / "fs" / "passwd").read_text().splitlines()
    assert passwd[-1] == "lab:x:4242:4242:reprofleet sim login:/home/lab:/bin/bash"
    assert passwd[0].startswith("root:")  # the machine's own users stay (sshd's among them)
    assert (paths.root / "fs" / "group").read_text().splitlines()[-1] == "lab:x:4242:"
    home = paths.fs("home") / "lab"
    assert (home.stat().st_uid, home.stat().st_gid) == (4242, 4242)
    assert (paths.etc / "authorized_keys").read_text() == "ssh-ed25519 AAAA fleet\n"
    boot = hostfs.boot_script_text(paths, "h1", DIST, "lab")
    for line in (f"mount --bind {paths.root / 'fs' / 'passwd'} /etc/passwd", f"mount --bind {paths.fs('home')} /home",
                 f"PYTHONPATH={DIST} /usr/bin/python3 -m rfsim.sudo_broker"):
        assert line in boot
    assert boot.index("rfsim.sudo_broker") < boot.index("exec /usr/sbin/sshd")  # listening before anyone logs in
    sshd = hostfs.sshd_config_text(paths, "10.0.0.2", tmp_path / "authorized_keys", "lab")
    assert f"AuthorizedKeysFile {tmp_path / 'authorized_keys'} /etc/reprofleet-sim/authorized_keys" in sshd


def test_a_root_login_host_is_built_as_before(tmp_path: Path) -> None:
    paths = _tree(tmp_path, "root")
    assert not (paths.root / "fs" / "passwd").exists() and not paths.fs("home").exists()
    assert not (paths.etc / "authorized_keys").exists()
    boot = hostfs.boot_script_text(paths, "h1", DIST)
    assert "sudo_broker" not in boot and "/etc/passwd" not in boot
    assert hostfs.boot_script_text(paths, "h1", DIST, "root") == boot
    assert f"AuthorizedKeysFile {tmp_path / 'authorized_keys'}\n" in hostfs.sshd_config_text(
        paths, "10.0.0.2", tmp_path / "authorized_keys")


def test_the_inventory_logs_in_as_the_hosts_login(tmp_path: Path) -> None:
    fleet = FleetPaths(tmp_path)
    hosts = [SimHost(HostRecord(spec.name, i, "ns", "veth", f"10.0.0.{i + 2}", "cg", spec), fleet)
             for i, spec in enumerate([SimHostSpec("h-root"), SimHostSpec("h-lab", login_user="lab", sudo="none")])]
    entries = inventory_data(hosts, fleet, {})["all"]["children"]["sim"]["hosts"]
    assert (entries["h-root"]["ansible_user"], entries["h-lab"]["ansible_user"]) == ("root", "lab")


@pytest.mark.parametrize("fields", [dict(login_user="Lab"), dict(login_user="lab user"), dict(sudo="some")])
def test_a_login_or_sudo_rule_the_simulator_cannot_play_is_refused(fields: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="login_user must be a user name"):
        SimHostSpec("h1", **fields)
