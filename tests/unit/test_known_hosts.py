"""New host keys are appended line by line under a lock; the user's known_hosts is never rewritten."""

from __future__ import annotations

import threading
from pathlib import Path

import paramiko

from reprofleet.remote.transport import append_known_host, load_known_hosts

_CA = paramiko.ECDSAKey.generate()
USER_FILE = (f"# my hosts, by hand\n@cert-authority *.lab.example {_CA.get_name()} {_CA.get_base64()}\n"
             f"@revoked old.lab.example {_CA.get_name()} {_CA.get_base64()}\n")


def test_two_new_hosts_at_once_both_keep_their_keys_and_the_users_lines_stay(tmp_path: Path) -> None:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(USER_FILE)
    keys = {f"[10.0.0.{i}]:2222": paramiko.ECDSAKey.generate() for i in range(8)}
    start = threading.Barrier(len(keys))

    def add(hostname: str) -> None:
        start.wait()
        append_known_host(known_hosts, hostname, keys[hostname])

    threads = [threading.Thread(target=add, args=(h,)) for h in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    text = known_hosts.read_text()
    assert text.startswith(USER_FILE)  # comments, @cert-authority and @revoked untouched
    loaded = paramiko.HostKeys()
    revoked = load_known_hosts(loaded, known_hosts)
    assert revoked == {_CA.get_base64()}
    for hostname, key in keys.items():
        assert loaded.lookup(hostname) is not None and loaded.lookup(hostname)[key.get_name()] == key


def test_the_same_key_twice_is_one_line(tmp_path: Path) -> None:
    known_hosts = tmp_path / "known_hosts"
    key = paramiko.ECDSAKey.generate()
    assert append_known_host(known_hosts, "ws01", key)
    assert not append_known_host(known_hosts, "ws01", key)
    assert len(known_hosts.read_text().splitlines()) == 1
