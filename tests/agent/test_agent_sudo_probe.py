"""The privilege probe asks sudo about a command line the campaign really runs, so that the
README's sudoers rule, which allows only the campaign's nvidia-smi arguments (never ``-f FILE``,
which writes any file as root), is found (issue 34 item 8). Run against a stand-in ``sudo`` that
allows exactly what that rule allows."""

from __future__ import annotations

import re
import stat
import subprocess
import sys
from typing import Any

from tests.support import agent_harness as h

# The README's rule, as the regular expression sudo (>= 1.9.10) matches the arguments with.
README_RULE = r"^-i [0-9]+ -(pm [01]|pl [0-9]+(\.[0-9]+)?|(lgc|lmc|ac) [0-9]+,[0-9]+|rgc|rmc|rac)$"

FAKE_SUDO = '''#!{python}
import re, sys
args = sys.argv[1:]
assert args[:2] == ["-n", "-l"], args
sys.exit(0 if re.match({rule!r}, " ".join(args[3:])) else 1)
'''


def test_the_privilege_probe_finds_sudo_under_a_rule_that_allows_only_the_campaigns_arguments(
        tmp_path_factory: Any) -> None:
    tools = tmp_path_factory.mktemp("tools")
    sudo = tools / "sudo"
    sudo.write_text(FAKE_SUDO.format(python=sys.executable, rule=README_RULE))
    sudo.chmod(sudo.stat().st_mode | stat.S_IXUSR)
    probe = ("import os, sys; os.geteuid = lambda: 1000; sys.path.insert(0, %r); import host_facts; "
             "print(host_facts.privilege('/usr/bin/nvidia-smi'))" % str(h.COLLECTORS))
    env = h.agent_env({"PATH": f"{tools}:/usr/bin:/bin"})
    said = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=30)
    assert said.stdout.strip() == "sudo", said.stderr
    for allowed in ("-i 0 -rgc", "-i 1 -pl 287.5", "-i 0 -lgc 180,2800", "-i 0 -pm 1", "-i 0 -rac"):
        assert re.match(README_RULE, allowed), allowed
    for refused in ("-i 0 -f /etc/shadow", "-i 0 -pl 300 -f /root/.bashrc", "-q", ""):
        assert not re.match(README_RULE, refused), refused


def test_the_readme_and_doctor_name_the_rule_the_probe_is_tested_against() -> None:
    from reprofleet.campaign.doctor import SMI_ARGUMENTS

    readme = (h.COLLECTORS.parent / "README.md").read_text()
    assert SMI_ARGUMENTS == README_RULE.replace(",", "\\,")  # sudoers escapes the comma
    assert f"NOPASSWD: /usr/bin/nvidia-smi {SMI_ARGUMENTS}" in readme
