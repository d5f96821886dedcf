"""invoke facts --bug-report on the simulated fleet: each host's nvidia-bug-report.log.gz lands
in INTO/<host>/ with its size and sha256, through a root login or ``sudo -n``; a host without
the script, a login sudo does not let run it (the sudoers line printed) and a script that
outlasts --bug-report-timeout each say so in one line while the others go on (exit 3); no
host keeps the temporary folder."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reprofleet.sim.spec import SimHostSpec

pytestmark = pytest.mark.fleet


def test_bug_reports_are_fetched_per_host_and_each_failure_is_one_line(sim_fleet: Any, sim_inventory: Any,
                                                                         tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("br-root"), SimHostSpec("br-sudo", login_user="lab", sudo="all"),
                       SimHostSpec("br-nosudo", login_user="lab", sudo="nvidia-smi"), SimHostSpec("br-absent"),
                       SimHostSpec("br-slow")])
    by_name = {h.name: h for h in fleet.hosts}
    (by_name["br-absent"].paths.fs("bin") / "nvidia-bug-report.sh").unlink()
    config = by_name["br-slow"].paths.host_config
    config.write_text(json.dumps({**json.loads(config.read_text()), "bug_report_s": 120}))
    inventory = sim_inventory(fleet)
    env = {**os.environ, "INVOKE_REPROFLEET_KNOWN_HOSTS": str(fleet.known_hosts_path)}
    done = subprocess.run([sys.executable, "-m", "reprofleet", "facts", "-i", str(inventory), "--bug-report",
                           "--into", str(tmp_path / "reports"), "--bug-report-timeout", "8", "--json"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert done.returncode == 3, done.stdout + done.stderr
    found = {d["host"]: d for d in map(json.loads, done.stdout.splitlines())}
    assert {host: d["status"] for host, d in found.items()} == {
        "br-root": "fetched", "br-sudo": "fetched", "br-nosudo": "failed", "br-absent": "absent", "br-slow": "failed"}
    for host in ("br-root", "br-sudo"):
        archive = tmp_path / "reports" / host / "nvidia-bug-report.log.gz"
        assert found[host]["path"] == str(archive)
        data = archive.read_bytes()
        assert (found[host]["size"], found[host]["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
        log = gzip.decompress(data).decode()
        assert "Start of NVIDIA bug report log file" in log and "nvidia-smi -q" in log
    assert "lab may not run nvidia-bug-report.sh" in found["br-nosudo"]["detail"]
    assert "`lab ALL=(root) NOPASSWD: /usr/local/bin/nvidia-bug-report.sh`" in found["br-nosudo"]["fix"]
    assert "no nvidia-bug-report.sh on this host" in found["br-absent"]["detail"]
    assert "did not finish within 8 s" in found["br-slow"]["detail"]
    for host in fleet.hosts:  # the temporary folder went, whatever happened
        left = host.ssh("ls -d /tmp/reprofleet-bug-report.* 2>/dev/null | wc -l")
        assert left.stdout.strip() == "0", (host.name, left.stdout, left.stderr)
