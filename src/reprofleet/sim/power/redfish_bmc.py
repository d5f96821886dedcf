"""``RedfishBmc``: sushy-tools' Redfish emulator (fake driver), one system per host.

    bmc = RedfishBmc(workdir, {"ws01": host_a / "hw/power"}, user="root", password="s3cret").start()
    bmc.pdu_block("ws01", credentials="env:WS01_BMC")   # system: ws01

One emulator serves every host (each a ComputerSystem named after it, with a UUID derived
from the name); a fresh state directory per start; basic auth through an htpasswd file
(bcrypt, the only scheme the emulator accepts) when a password is given. Plus the
``redfish_watch`` daemon that wires each system's PowerState to its host's switch file, and
the ``redfish_front`` that clients talk to: it forwards to the emulator and adds what the
emulator lacks (each system's chassis Power, metered like the plugs, and its SEL log service).
The emulator applies resets 1-11 s late: clients must read back with a deadline. The
BMC's PowerState is the truth; the host's switch follows it within the watcher's poll
interval (0.2 s), so a client may read "On" a moment before the host starts booting.

Options that make it as unkind as a real BMC (``redfish_quirks`` has the sources):
``latency_s`` on every answer, ``conflict_after_off_s`` (HTTP 409 to a power-on that soon
after the host lost power), ``post_s`` (HTTP 400 to any reset that soon after it got
power), ``power_cycle_off_s`` (offer PowerCycle, carried out by the BMC), ``tls`` (HTTPS
with a self-signed certificate, ``ca_file`` to trust it); ``apply_delay_s`` bounds the
emulator's own reset delay (default its 1..11 s).

    bmc = RedfishBmc(workdir, systems, password="pw", conflict_after_off_s=3, tls=True).start()
"""

from __future__ import annotations

import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

import requests

from ..procs import SimError
from .daemons import LOOPBACK, PYTHON, PowerSim, free_port, write_json
from .switch import Outlets, outlets_to_json, read_switch

UUID_NAMESPACE = uuid.UUID("6d0c2a4e-5b1f-4f4e-9a53-2f8a0c6b7e11")


def system_uuid(name: str) -> str:
    return str(uuid.uuid5(UUID_NAMESPACE, name))


def emulator_path() -> str:
    beside = Path(sys.executable).parent / "sushy-emulator"
    found = str(beside) if beside.exists() else shutil.which("sushy-emulator")
    if not found:
        raise SimError("sushy-emulator not found: pip install sushy-tools")
    return found


def write_self_signed(key_path: Path, cert_path: Path, address: str) -> None:
    """An RSA key and a self-signed certificate naming ``address`` (as IP SAN), valid for two days."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "reprofleet simulated BMC")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(address))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def htpasswd_line(user: str, password: str) -> str:
    import bcrypt  # sushy-tools depends on it; only the simulator needs it

    return f"{user}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()}\n"


class RedfishBmc(PowerSim):
    """A Redfish service with one ComputerSystem per simulated host."""

    driver = "redfish"

    def __init__(self, workdir: Path | str, systems: Outlets, *, user: str = "root", password: str | None = None,
                 port: int = 0, poll_s: float = 0.2, apply_delay_s: tuple[int, int] = (1, 11), latency_s: float = 0.0,
                 conflict_after_off_s: float = 0.0, post_s: float = 0.0, power_cycle_off_s: float | None = None,
                 tls: bool = False) -> None:
        super().__init__(workdir)
        self.systems = {str(k): Path(v) for k, v in systems.items()}
        self.user = user
        self.password = password
        self.port = port or None
        self.emulator_port: int | None = None
        self.poll_s = poll_s
        self.apply_delay_s = apply_delay_s
        self.quirks = {"latency_s": latency_s, "conflict_after_off_s": conflict_after_off_s, "post_s": post_s,
                       "power_cycle_off_s": power_cycle_off_s}
        self.tls = tls
        self.ca_file = self.workdir / "bmc-cert.pem"  # trust this to verify the front's certificate

    @property
    def secret(self) -> str | None:
        return f"{self.user}:{self.password}" if self.password is not None else None

    @property
    def address(self) -> str:
        if self.port is None:
            raise SimError("the BMC is not started")
        return f"{'https' if self.tls else 'http'}://{LOOPBACK}:{self.port}"

    @property
    def emulator_address(self) -> str:
        return f"http://{LOOPBACK}:{self.emulator_port}"

    def _block_options(self, outlet: str) -> dict[str, Any]:
        return {"system": outlet}

    def pdu_block(self, outlet: str | None, credentials: str | None = None) -> dict[str, Any]:
        block = super().pdu_block(None, credentials)  # a BMC has no outlet: the system names the host
        block.update(self._block_options(str(outlet)))
        return block

    def _config_text(self, state_dir: Path, auth_file: Path | None) -> str:
        systems = [{"uuid": system_uuid(name), "name": name, "power_state": "On" if read_switch(path) else "Off",
                    "nics": [{"mac": "52:54:00:%02x:%02x:%02x" % tuple(uuid.uuid5(UUID_NAMESPACE, name).bytes[:3]),
                              "ip": "10.213.0.%d" % (10 + index)}]}
                   for index, (name, path) in enumerate(self.systems.items())]
        lines = [f"SUSHY_EMULATOR_LISTEN_IP = {LOOPBACK!r}", f"SUSHY_EMULATOR_LISTEN_PORT = {self.emulator_port}",
                 "SUSHY_EMULATOR_FAKE_DRIVER = True", f"SUSHY_EMULATOR_STATE_DIR = {str(state_dir)!r}",
                 f"SUSHY_EMULATOR_FAKE_SYSTEMS = {systems!r}"]
        if auth_file:
            lines.append(f"SUSHY_EMULATOR_AUTH_FILE = {str(auth_file)!r}")
        return "\n".join(lines) + "\n"

    def _launch(self) -> None:
        self.port = self.port or free_port()
        self.emulator_port = free_port()
        state_dir = self.workdir / "state"
        shutil.rmtree(state_dir, ignore_errors=True)
        state_dir.mkdir()
        auth_file = None
        if self.password is not None:
            auth_file = self.workdir / "htpasswd"
            auth_file.write_text(htpasswd_line(self.user, self.password))
            auth_file.chmod(0o600)
        config = self.workdir / "emulator.conf"
        config.write_text(self._config_text(state_dir, auth_file))
        low, high = self.apply_delay_s
        emulator_path()  # installed?
        self.daemons.spawn("emulator", [PYTHON, "-m", "reprofleet.sim.power.sushy_launch", str(low), str(high),
                                        "--config", str(config)])
        self.daemons.wait_ready("emulator", lambda: self._answers(self.emulator_address), 30.0,
                                "the Redfish emulator to answer /redfish/v1")
        self._start_watcher()
        self._start_front()

    @staticmethod
    def _answers(address: str, ca_file: Path | None = None, timeout_s: float = 1.0) -> bool:
        verify = str(ca_file) if ca_file is not None and address.startswith("https") else True
        try:
            return requests.get(f"{address}/redfish/v1", timeout=timeout_s, verify=verify).status_code == 200
        except requests.RequestException:
            return False

    def _start_front(self) -> None:
        ready = self.workdir / "front.ready"
        ready.unlink(missing_ok=True)
        config = self.workdir / "front.json"
        tls = self._make_certificate() if self.tls else None
        write_json(config, {"port": self.port, "emulator": self.emulator_address, "poll_s": self.poll_s,
                            "ready": str(ready), "quirks": self.quirks, "tls": tls,
                            "systems": {n: {"uuid": system_uuid(n), "switch": str(p)} for n, p in self.systems.items()}})
        self.daemons.spawn("front", [PYTHON, "-m", "reprofleet.sim.power.redfish_front", str(config)])
        probe_s = 1.0 + 2 * float(self.quirks["latency_s"] or 0.0)

        def answers() -> bool:
            return ready.exists() and self._answers(self.address, self.ca_file, probe_s)

        self.daemons.wait_ready("front", answers, 20.0 + 4 * probe_s,
                                "the Redfish front to answer /redfish/v1")

    def _make_certificate(self) -> dict[str, str]:
        """A self-signed certificate for 127.0.0.1, as a BMC ships one (``ca_file`` trusts it)."""
        key, cert = self.workdir / "bmc-key.pem", self.ca_file
        write_self_signed(key, cert, LOOPBACK)
        return {"cert": str(cert), "key": str(key)}

    def _start_watcher(self) -> None:
        ready = self.workdir / "watch.ready"
        ready.unlink(missing_ok=True)
        config = self.workdir / "watch.json"
        write_json(config, {"base": self.emulator_address, "user": self.user, "password": self.password,
                            "systems": outlets_to_json({system_uuid(n): p for n, p in self.systems.items()}),
                            "poll_s": self.poll_s, "ready": str(ready)})
        self.daemons.spawn("watcher", [PYTHON, "-m", "reprofleet.sim.power.redfish_watch", str(config)])
        self.daemons.wait_ready("watcher", ready.exists, 20.0, "the BMC watcher's first poll")
