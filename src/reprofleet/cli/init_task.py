"""``reprofleet init``: the first command after ``pip install``: a starter inventory and
playbook in the current folder, then the way to ``doctor --cycle``.

The hosts and their power device come from the flags, or, with none and a terminal, from a
person's answers; without either it fails in one line (exit 2), as a confirmation does.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from invoke import Context, task

from reprofleet.cli.exits import BadArgument, ExitStatus, handled
from reprofleet.cli.terminal_text import plain

if TYPE_CHECKING:  # a real import would load the inventory loader and the drivers for `--list`
    from reprofleet.campaign.starter import Starter


@task(iterable=["host", "pdu", "outlet", "pdu_option"],
      help={"host": "a host as NAME=ADDRESS (repeat once per host)",
            "user": "the SSH login on the hosts (default: yours)",
            "driver": "their power device's driver: tasmota, shelly, snmp, redfish, ipmi, fence, pdudaemon, command "
                      "(none: no power control; a wedged host then waits for a person)",
            "pdu": "the device's address: once for every host, or once per host in --host order (a plug each)",
            "outlet": "the outlet, relay or switch of each host, in --host order (default: the driver's)",
            "pdu-option": "a further option of the device as KEY=VALUE, repeatable (snmp needs model=apc_rpdu or "
                          "another model; README, Power control)",
            "credentials": "the device's secret by reference: env:VAR or file:PATH (never the secret itself)",
            "playbook": "the built-in playbook to start from (default sm120-hostwedge, the seed's experiment)"})
@handled
def init(c: Context, host: list[str] | None = None, user: str = "", driver: str = "", pdu: list[str] | None = None,
         outlet: list[str] | None = None, pdu_option: list[str] | None = None, credentials: str = "",
         playbook: str = "") -> ExitStatus:
    """Write a starter inventory.yml, a playbook and its PoC into the current folder (never over a file)."""
    # lazy: the inventory loader and the power drivers (to check what is written): paid by init alone
    from reprofleet.campaign.starter import starter, write_starter
    from reprofleet.playbook.builtin import SEED

    words = list(host or [])
    if words:
        start = starter(words, driver=driver or None, pdus=list(pdu or []), outlets=list(outlet or []),
                        user=user or None, credentials=credentials or None, options=list(pdu_option or []),
                        playbook=playbook or SEED)
    else:
        if pdu or outlet or driver or credentials or pdu_option:
            raise BadArgument("which hosts? --host NAME=ADDRESS, once per host")
        start = _asked(playbook or SEED, user)
    written = write_starter(start, Path.cwd())
    book = written[1].name
    print(plain(f"wrote {', '.join(str(p.relative_to(Path.cwd())) for p in written)}"))
    print("next, in this folder:")
    print(f"  reprofleet doctor -i inventory.yml -p {book}            # what each host still needs, and the fix")
    print(f"  reprofleet doctor --cycle -i inventory.yml -p {book}    # one watched power cycle per host: outlet, "
          "BIOS, boot time")
    print(f"  reprofleet campaign -i inventory.yml -p {book} --dry-run")
    return ExitStatus.OK


def _asked(playbook: str, user: str) -> "Starter":
    """The same questions as the flags, asked at a terminal; without one, one line (exit 2)."""
    from reprofleet.campaign.starter import starter

    if not sys.stdin.isatty():
        raise BadArgument("reprofleet init: no --host given and no terminal to ask on: pass --host NAME=ADDRESS "
                          "(and --driver, --pdu, --outlet for the power device)")
    hosts = input("hosts, as NAME=ADDRESS separated by spaces: ").split()
    user = user or input("SSH login on the hosts (empty: yours): ").strip()
    driver = input("power device driver (tasmota, shelly, snmp, redfish, ipmi, fence, pdudaemon, command; "
                   "empty: none): ").strip()
    pdus: list[str] = []
    outlets: list[str] = []
    credentials = ""
    options: list[str] = []
    if driver:
        pdus = input("its address (one for every host, or one per host separated by spaces): ").split()
        outlets = input("each host's outlet, separated by spaces (empty: the driver's default): ").split()
        credentials = input("its credentials as env:VAR or file:PATH (empty: none): ").strip()
        options = input("its further options as KEY=VALUE separated by spaces (snmp: model=apc_rpdu; empty: none): "
                        ).split()
    return starter(hosts, driver=driver or None, pdus=pdus, outlets=outlets, user=user or None,
                   credentials=credentials or None, options=options, playbook=playbook)
