"""The Ansible inventory of a simulated fleet (what `reprofleet campaign --hosts` reads).

    all:
      children:
        sim:
          hosts:
            sim0:
              ansible_host: 10.213.7.10
              ansible_user: root             # or the host's own login (SimHostSpec.login_user)
              ansible_ssh_private_key_file: <fleet>/id_ed25519
              ansible_python_interpreter: /usr/bin/python3
              reprofleet_known_hosts: <fleet>/known_hosts
              gpu_index: 0
              pdu: {driver: ..., address: ..., outlet: ...}   # when a power simulator is attached
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import yaml

from reprofleet.sim.layout import FleetPaths

if TYPE_CHECKING:
    from reprofleet.sim.host import SimHost

HEADER = "# Simulated fleet (reprofleet.sim), generated; host keys in known_hosts beside it.\n"


def inventory_data(hosts: Sequence["SimHost"], paths: FleetPaths,
                   pdu: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    entries: dict[str, Any] = {}
    for host in hosts:
        entry: dict[str, Any] = {
            "ansible_host": host.address,
            "ansible_user": host.spec.login_user,
            "ansible_ssh_private_key_file": str(paths.key),
            "ansible_python_interpreter": "/usr/bin/python3",
            "reprofleet_known_hosts": str(paths.known_hosts),
            "gpu_index": 0,
        }
        if host.name in pdu:
            entry["pdu"] = dict(pdu[host.name])
        entries[host.name] = entry
    return {"all": {"children": {"sim": {"hosts": entries}}}}


def write_inventory(path: Path, hosts: Sequence["SimHost"], paths: FleetPaths,
                    pdu: Mapping[str, Mapping[str, Any]]) -> Path:
    text = HEADER + yaml.safe_dump(inventory_data(hosts, paths, pdu), sort_keys=False)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path
