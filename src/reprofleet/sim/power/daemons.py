"""What every power simulator shares: a work directory, daemons tracked by PID, readiness
waits with deadlines, and the inventory ``pdu:`` block that points a host at it.

Daemons are started detached and recorded (PID + start time) in
``<workdir>/processes.json``, so a simulator started by ``sim.up`` in one process can be
stopped by ``sim.down`` in another (``attach``), and a PID reused by the system is never
signalled.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence, TypeVar

import reprofleet

from ...credentials import parse_credential_ref
from ...model import PowerPort, frozen_mapping
from ..procs import ProcessRef, SimError, spawn_detached

S = TypeVar("S", bound="PowerSim")
PACKAGE_ROOT = str(Path(reprofleet.__file__).resolve().parent.parent)
LOOPBACK = "127.0.0.1"


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port free on 127.0.0.1 now (TCP or UDP). Tiny race; simulators bind right after."""
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def python_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for ``python -m reprofleet...`` children: our package importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
    env.update(extra or {})
    return env


def log_tail(path: Path, lines: int = 8) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


class Daemons:
    """The processes one simulator started, persisted so another process can stop them."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.record = workdir / "processes.json"
        self.refs: dict[str, ProcessRef] = {}
        if self.record.exists():
            data = json.loads(self.record.read_text())
            self.refs = {name: ProcessRef.from_json(ref) for name, ref in data.items()}

    def log_path(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    def spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> ProcessRef:
        ref = spawn_detached(list(argv), log_path=self.log_path(name), env=env or python_env())
        self.refs[name] = ref
        self._save()
        return ref

    def _save(self) -> None:
        tmp = self.record.with_suffix(".tmp")
        tmp.write_text(json.dumps({name: ref.as_json() for name, ref in self.refs.items()}))
        os.replace(tmp, self.record)

    def stop_all(self) -> None:
        """Stop every recorded daemon (newest first), by PID; each gets SIGTERM then SIGKILL."""
        for name in reversed(list(self.refs)):
            self.refs[name].stop(grace_s=3.0)
            del self.refs[name]
            self._save()

    def wait_ready(self, name: str, probe: Any, timeout_s: float, what: str) -> None:
        """Poll ``probe()`` until true; fail early if the daemon died, with its log's tail."""
        ref = self.refs[name]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if probe():
                return
            if not ref.alive():
                raise SimError(f"{name} exited while we waited for {what}: {log_tail(self.log_path(name))}")
            time.sleep(0.05)
        raise SimError(f"timed out after {timeout_s:g}s waiting for {what}: {log_tail(self.log_path(name))}")


def stop_simulator(workdir: Path | str) -> None:
    """Stop the daemons of a simulator started elsewhere (``sim.down`` after ``sim.up``)."""
    Daemons(Path(workdir)).stop_all()


def tcp_accepts(port: int) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=0.5):
            return True
    except OSError:
        return False


class PowerSim(ABC):
    """Base of the simulators: ``start()``/``stop()``, a context manager, a pdu block."""

    driver = ""

    def __init__(self, workdir: Path | str) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.daemons = Daemons(self.workdir)

    def start(self: S) -> S:
        try:
            self._launch()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self.daemons.stop_all()

    def __enter__(self: S) -> S:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @abstractmethod
    def _launch(self) -> None:
        """Start the simulator's processes and wait until they answer."""

    @property
    def secret(self) -> str | None:
        """What the driver's credentials must hold; None for a device that takes none."""
        return None

    @property
    @abstractmethod
    def address(self) -> str:
        """Where a real client reaches the simulator (the inventory's ``address``)."""

    def _block_options(self, outlet: str) -> dict[str, Any]:
        return {}

    def pdu_block(self, outlet: str | None, credentials: str | None = None) -> dict[str, Any]:
        """The inventory ``pdu:`` mapping for the host on ``outlet``."""
        block: dict[str, Any] = {"driver": self.driver, "address": self.address}
        if outlet is not None:
            block["outlet"] = str(outlet)
        if credentials:
            block["credentials"] = credentials
        block.update(self._block_options(str(outlet)))
        return block

    def power_port(self, outlet: str | None, credentials: str | None = None, **options: Any) -> PowerPort:
        """The same as a model.PowerPort (what the inventory loader would build)."""
        block = self.pdu_block(outlet, credentials)
        block.update(options)
        ref = block.pop("credentials", None)
        return PowerPort(driver=block.pop("driver"), address=block.pop("address"), outlet=block.pop("outlet", None),
                         credentials=parse_credential_ref(ref) if ref else None, options=frozen_mapping(block))


def write_json(path: Path, data: Any, mode: int = 0o600) -> None:
    """Atomically write ``data``; owner-only by default (simulator configs hold passwords)."""
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(data, indent=1, sort_keys=True))
    os.chmod(tmp, mode)
    os.replace(tmp, path)


PYTHON = sys.executable
