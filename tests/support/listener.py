"""A TCP port that counts who connects: the evidence that a command contacted no host
(rather than a wall-clock bound, which a loaded machine breaks)."""

from __future__ import annotations

import socket
import threading
from types import TracebackType


class CountingPort:
    """Listens on 127.0.0.1 (an ephemeral port) and counts the connections it accepts."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        self.connections = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while not self._done.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def __enter__(self) -> "CountingPort":
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._done.set()
        self._thread.join(timeout=5)
        self._server.close()
