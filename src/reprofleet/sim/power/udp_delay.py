"""A slow BMC's network: ``python -m reprofleet.sim.power.udp_delay CONFIG``.

Relays UDP datagrams between clients and a simulated BMC (ipmi_sim), holding every
client's datagram ``latency_s`` before passing it on: what a busy BMC's IPMI answers look
like from the controller (seconds per request, a RAKP login included). Replies go back at
once, through one upstream socket per client so each client's session stays its own.

CONFIG (JSON): ``listen`` (port on 127.0.0.1), ``target`` (the BMC's port), ``latency_s``,
``ready`` (a file written once listening).
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import sys
import threading
from pathlib import Path
from typing import Any, Mapping

LOOPBACK = "127.0.0.1"
MAX_DATAGRAM = 65535


def relay(config: Mapping[str, Any]) -> None:
    latency = float(config["latency_s"])
    target = (LOOPBACK, int(config["target"]))
    front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    front.bind((LOOPBACK, int(config["listen"])))
    upstream: dict[Any, socket.socket] = {}  # client address -> its socket towards the BMC
    client_of: dict[socket.socket, Any] = {}
    selector = selectors.DefaultSelector()
    selector.register(front, selectors.EVENT_READ)
    Path(config["ready"]).write_text(json.dumps({"pid": os.getpid()}))
    while True:
        for key, _ in selector.select(timeout=1.0):
            sock: socket.socket = key.fileobj  # type: ignore[assignment]
            data, sender = sock.recvfrom(MAX_DATAGRAM)
            if sock is front:
                up = upstream.get(sender)
                if up is None:
                    up = upstream[sender] = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    up.connect(target)
                    client_of[up] = sender
                    selector.register(up, selectors.EVENT_READ)
                timer = threading.Timer(latency, up.send, args=(data,))
                timer.daemon = True
                timer.start()
            else:
                front.sendto(data, client_of[sock])


if __name__ == "__main__":
    relay(json.loads(Path(sys.argv[1]).read_text()))
