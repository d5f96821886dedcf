"""The simulated hosts' sudo keeps to sudo(8) and sudoers(5) where the controller depends on
them: ``-n`` never prompts ("sudo: a password is required", exit 1), ``-l COMMAND`` answers
with the command's full path or exit 1, root always may, the login only what its host's rule
gives it, the command runs as root on the caller's own streams, and a signal sent to sudo
reaches the command (so ``timeout CMD`` ends it). Run without namespaces: a broker on a
temporary host tree, callers as uid 65534 (setpriv)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the broker runs as root and callers as another user")

NOBODY = "65534"


def _sudo(tree: Any, *argv: str, user: str | None = NOBODY, timeout_s: float = 30.0) -> Any:
    return tree.run(["sudo", *argv], user=user, timeout_s=timeout_s)


def test_all_runs_any_command_as_root_on_the_callers_streams(sudo_host: Callable[[str], Any]) -> None:
    tree = sudo_host("all")
    done = _sudo(tree, "-n", "sh", "-c", "id -u; echo to-stderr >&2; exit 3")
    assert (done.returncode, done.stdout, done.stderr) == (3, "0\n", "to-stderr\n")
    assert _sudo(tree, "-n", "-l", "true").stdout.strip() == "/usr/bin/true"


def test_nvidia_smi_only_lets_the_hosts_nvidia_smi_run(sudo_host: Callable[[str], Any]) -> None:
    tree = sudo_host("nvidia-smi")
    smi = str(tree.bin / "nvidia-smi")
    listed = _sudo(tree, "-n", "-l", smi)
    assert (listed.returncode, listed.stdout.strip()) == (0, smi)
    assert _sudo(tree, "-n", "-l", "nvidia-smi", "-i", "0").stdout.strip() == f"{smi} -i 0"
    ran = _sudo(tree, "-n", "nvidia-smi", "-pm", "1")
    assert ran.returncode == 0, ran.stdout + ran.stderr  # a setter: the fake refuses all but root
    refused = _sudo(tree, "-n", "id", "-u")
    assert (refused.returncode, refused.stdout, refused.stderr) == (1, "", "sudo: a password is required\n")
    assert _sudo(tree, "-n", "-l", "id").returncode == 1
    unprivileged = tree.run(["nvidia-smi", "-pm", "1"], user=NOBODY)
    assert unprivileged.returncode != 0  # the same setter without sudo is refused: sudo made the difference


def test_none_refuses_everything_and_without_n_says_no_terminal_was_there(sudo_host: Callable[[str], Any]) -> None:
    tree = sudo_host("none")
    assert _sudo(tree, "-n", "-l", str(tree.bin / "nvidia-smi")).returncode == 1
    assert _sudo(tree, "-n", "true").stderr == "sudo: a password is required\n"
    prompted = _sudo(tree, "true")
    assert prompted.returncode == 1 and "a terminal is required" in prompted.stderr
    assert _sudo(tree, "-n", "id", "-u", user=None).stdout == "0\n"  # root always may


def test_a_signal_sent_to_sudo_reaches_the_command(sudo_host: Callable[[str], Any], tmp_path: Path) -> None:
    tree = sudo_host("all")
    pid_file = tree.root / "tmp-pid"
    started = time.monotonic()
    done = tree.run(["timeout", "1", "/usr/bin/python3", str(tree.bin / "sudo"), "-n", "sh", "-c",
                     f"echo $$ > {pid_file}; exec sleep 30"], user=NOBODY, timeout_s=20)
    assert done.returncode == 124 and time.monotonic() - started < 15
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()


def test_options_it_does_not_model_are_refused_not_ignored(sudo_host: Callable[[str], Any]) -> None:
    tree = sudo_host("all")
    assert _sudo(tree, "-u", "lab", "true").stderr.startswith("sudo: the simulated sudo runs commands as root only")
    assert "invalid option -- 'E'" in _sudo(tree, "-E", "true").stderr


@pytest.mark.parametrize("rule, privilege", [("nvidia-smi", "sudo"), ("none", "none")])
def test_the_agents_own_privilege_probe_reads_the_rule(sudo_host: Callable[[str], Any], rule: str,
                                                       privilege: str) -> None:
    """What doctor and the readiness check see on such a host: the agent's facts, run as the login."""
    import json

    from reprofleet.remote.agent import load_bundle

    tree = sudo_host(rule)
    agent = tree.root / "agent"
    agent.mkdir(mode=0o755)
    for name, content in load_bundle().files:
        (agent / name).parent.mkdir(parents=True, exist_ok=True)
        (agent / name).write_bytes(content)
        (agent / name).chmod(0o644)
    state = tree.root / "state"
    state.mkdir()
    state.chmod(0o777)
    done = tree.run(["python3", str(agent / "agent.py"), "--state-dir", str(state), "facts"], user=NOBODY,
                    timeout_s=60)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    facts = next((line for line in lines if line.get("k") == "facts"), None)
    assert facts is not None, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert (facts["privilege"], facts["nvidia_smi"]) == (privilege, str(tree.bin / "nvidia-smi")), done.stderr
