"""Power control a lab can trust, on the simulated fleet: no secret ends up in any file or
line of output a campaign writes, whichever real device protocol switches the host; nor
does a playbook's env_secrets value, which reaches the PoC's container and no command line
(``ps``) or file on the hosts (the sweep's own unit tests: tests/unit/test_secret_sweep.py).

(A host never stranded off when a read-back is lost, and a host that does not come back
retried once and then named with its likely causes, are runner decisions:
tests/seam/test_seam_power.py plays them at the host seam in virtual time.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_records
from reprofleet.runner.poc import CONTAINER_POC
from reprofleet.runner.recovery import recovery_factory
from reprofleet.sim.power import HttpPlugServer, IpmiBmc, PdudaemonServer, RedfishBmc, SnmpPdu
from reprofleet.sim.spec import SimHostSpec
from tests.support.secret_sweep import PsSweep, files_under, leaks
from tests.support.fleet_campaign import settings_for, write_playbook

pytestmark = pytest.mark.fleet


HF_TOKEN = "hf-Tok-9d2e"  # the playbook's env_secrets value: in the PoC's container, nowhere else


def book(tmp_path: Path, *, attempts: int = 2, boot_s: int = 60) -> Path:
    path = write_playbook(tmp_path / "book", attempts=attempts, attempt_timeout=30,
                          extra="env_secrets: [HF_TOKEN]\n")  # its value: REPROFLEET_SECRET_HF_TOKEN
    path.write_text(path.read_text().replace("boot: 60", f"boot: {boot_s}"))
    return path


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


SIMULATED_DEVICES = ("tasmota", "shelly1", "shelly2", "snmp", "redfish", "ipmi", "pdudaemon", "command")


def simulator_for(kind: str, workdir: Path, switch: Path) -> Any:
    secrets = {"tasmota": "tz-Pw-61f0", "shelly1": "s1-Pw-2c77", "shelly2": "s2-Pw-93ab"}
    if kind in secrets:
        return HttpPlugServer(workdir, kind, {"1" if kind == "tasmota" else "0": switch}, password=secrets[kind])
    if kind == "snmp":
        return SnmpPdu(workdir, {"1": switch}, community="comm-Pw-4d1e")
    if kind == "redfish":
        return RedfishBmc(workdir, {"sys1": switch}, password="rf-Pw-7b30")
    if kind == "ipmi":
        return IpmiBmc(workdir, {"1": switch}, password="ipmi-Pw-0e5c")
    return PdudaemonServer(workdir, {"1": switch})


@pytest.mark.timeout(600)
def test_a_campaign_with_every_driver_writes_no_secret_anywhere(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("pdudaemon")
    fleet = sim_fleet([SimHostSpec(f"sec{i}", script=("wedge", "clean"), boot_delay_s=0.5, time_scale=0.02)
                       for i in range(len(SIMULATED_DEVICES))])
    sims, blocks, secrets = [], {}, []
    try:
        for kind, host in zip(SIMULATED_DEVICES, fleet.hosts):
            variable = f"RF_SECRET_{kind.upper()}"
            if kind == "command":
                secret = "cmd-Pw-58aa"
                # a tool that reads the secret from its environment itself: a template naming the
                # variable is refused (it could put the secret on a command line)
                tool = tmp_path / "tools" / "switch.sh"
                tool.parent.mkdir(parents=True, exist_ok=True)
                tool.write_text(f'[ "$REPROFLEET_POWER_SECRET" = {secret} ] && echo "$1" > {host.paths.power}\n')
                blocks[host.name] = {
                    "driver": "command", "address": "local", "outlet": host.name, "credentials": f"env:{variable}",
                    "on_command": f"sh {tool} on", "off_command": f"sh {tool} off",
                    "status_command": f"cat {host.paths.power}"}
            else:
                sim = simulator_for(kind, tmp_path / "sims" / kind, host.paths.power).start()
                sims.append(sim)
                outlet = {"tasmota": "1", "redfish": "sys1", "ipmi": "1", "pdudaemon": "1", "snmp": "1"}.get(kind, "0")
                secret = sim.secret
                blocks[host.name] = sim.pdu_block(outlet, f"env:{variable}" if secret else None)
            if secret:
                monkeypatch.setenv(variable, secret)
                secrets.extend({secret, secret.split(":", 1)[-1]})
        monkeypatch.setenv("REPROFLEET_SECRET_HF_TOKEN", HF_TOKEN)  # the operator's side: a playbook names no source
        secrets.append(HF_TOKEN)
        reports = tmp_path / "reports"
        plan = make_plan(load_playbook(book(tmp_path)), load_inventory(sim_inventory(fleet, pdu=blocks)).hosts)
        # every command line on the machine (controller and hosts) while it runs, and the token as
        # the PoC's own process (python3 /poc.py, in its container) has it in its environment
        with PsSweep(secrets, environ=("HF_TOKEN", f"python3 {CONTAINER_POC}")) as ps:
            result = run_campaign(plan, settings_for(fleet), reports, recovery_factory=recovery_factory)
    finally:
        for sim in sims:
            sim.stop()
    records = read_records(result.directory.attempts)
    assert sorted(r["outcome"] for r in records) == ["clean"] * len(fleet.hosts) + ["wedge"] * len(fleet.hosts)
    cycled = {p["host"] for p in lines(result.directory.power) if p["action"] == "cycle"}
    assert cycled == {h.name for h in fleet.hosts}  # every driver really switched its host
    output = capfd.readouterr()
    texts = {"stdout": output.out, "stderr": output.err, "log": caplog.text}
    texts.update({str(path): path.read_bytes().decode(errors="replace")
                  for path in reports.rglob("*") if path.is_file()})
    assert len(texts) > 5
    # Every file a host keeps (agent state, meta.json, output.log, /tmp, /var/log ...), but its
    # docker daemon's data root: dockerd's config.v2.json and containerd's meta.db hold a
    # container's environment, which is where the token must be (checked just below).
    daemons = [h.paths.docker / "data" for h in fleet.hosts]
    kept = files_under(*(h.paths.root for h in fleet.hosts), skip=daemons)
    assert any(p.endswith("meta.json") for p in kept)
    texts.update(kept)
    assert leaks(texts, secrets) == []
    assert ps.rounds > 10 and ps.found == []
    assert ps.environ_found == {HF_TOKEN}  # the PoC's processes, in the containers the attempts ran, had the token
