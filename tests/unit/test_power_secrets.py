"""A secret goes to the device and nowhere else: not to a proxy, not into a query string a
plug's firmware does not need, not onto a command line any local user can read."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from reprofleet.errors import PowerError
from reprofleet.model import CredentialRef, PowerPort, frozen_mapping
from reprofleet.power import PowerConfigError, PowerLog, PowerState, driver_for
from reprofleet.sim.power import plug_tasmota
from reprofleet.sim.power.plug_device import PlugDevice
from reprofleet.sim.power.plug_server import build_request_handler
from reprofleet.sim.power.switch import write_switch

PASSWORD = "t4smota-Secr3t"


class Plug:
    """An in-process Tasmota plug that remembers every request line and Authorization header."""

    def __init__(self, tmp_path: Path, legacy_auth: bool) -> None:
        self.switch = tmp_path / "power"
        write_switch(self.switch, True)
        self.device = PlugDevice({"1": self.switch}, "admin", PASSWORD, tmp_path / "faults.json", "tasmota-1",
                                 legacy_auth=legacy_auth)
        self.seen: list[str] = []
        seen, handle = self.seen, plug_tasmota.handle

        def recording(device: PlugDevice, method: str, path: str, query: Any, headers: Any, body: bytes) -> Any:
            seen.append(f"{method} {path}?{'&'.join(f'{k}={v}' for k, v in query.items())} "
                        f"auth={headers.get('authorization', '-')}")
            return handle(device, method, path, query, headers, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), build_request_handler(self.device, recording))
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.address = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Proxy(BaseHTTPRequestHandler):
    """A proxy that logs what it is sent, as a corporate proxy would."""

    log: list[str] = []

    def do_GET(self) -> None:  # noqa: N802
        Proxy.log.append(f"{self.path} {self.headers.get('Authorization', '')}")
        self.send_response(502)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[str]:
    Proxy.log = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def tasmota(address: str, log: PowerLog, **options: Any) -> Any:
    port = PowerPort("tasmota", address, "1", credentials=CredentialRef("env", "RF_SECRET_TASMOTA"),
                     options=frozen_mapping({"settle_s": 1.0, "poll_s": 0.02, "tries": 1, **options}))
    return driver_for(port, "ws01", log)


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PowerLog:
    monkeypatch.setenv("RF_SECRET_TASMOTA", f"admin:{PASSWORD}")
    return PowerLog(tmp_path / "power.jsonl")


def test_proxy_variables_and_netrc_never_see_a_plugs_password(tmp_path: Path, log: PowerLog, proxy: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    plug = Plug(tmp_path, legacy_auth=True)  # the query string carries the password here
    try:
        for variable in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
            monkeypatch.setenv(variable, proxy)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        netrc = tmp_path / "netrc"
        netrc.write_text("machine 127.0.0.1 login admin password from-netrc\n")
        monkeypatch.setenv("NETRC", str(netrc))
        assert tasmota(plug.address, log, auth="query").off() is PowerState.OFF
    finally:
        plug.close()
    assert Proxy.log == []
    assert not any("from-netrc" in line or "ZnJvbS1uZXRyYw" in line for line in plug.seen)


def test_tasmota_gets_basic_auth_first_and_no_password_in_any_url(tmp_path: Path, log: PowerLog) -> None:
    plug = Plug(tmp_path, legacy_auth=False)
    try:
        driver = tasmota(plug.address, log)
        assert driver.cycle(0.01) is PowerState.ON
    finally:
        plug.close()
    assert plug.seen and all("password=" not in line and "auth=Basic " in line for line in plug.seen)


def test_an_old_tasmota_that_only_reads_the_query_string_works_only_when_asked(tmp_path: Path, log: PowerLog) -> None:
    plug = Plug(tmp_path, legacy_auth=True)
    try:
        with pytest.raises(PowerError, match=r"set 'auth: query' in its pdu block"):
            tasmota(plug.address, log).off()  # a "Need user=" reply (forgeable on plain HTTP) is no fallback
        refused = list(plug.seen)
        driver = tasmota(plug.address, log, auth="query")
        assert driver.off() is PowerState.OFF
        assert driver.on() is PowerState.ON
    finally:
        plug.close()
    assert refused and all("auth=Basic" in line and "password=" not in line for line in refused)
    assert all("password=" in line for line in plug.seen[len(refused):])
    assert PASSWORD not in Path(str(log.path)).read_text()


def command_port(**options: Any) -> PowerPort:
    return PowerPort("command", "local", "1", credentials=CredentialRef("env", "RF_SECRET_CMD"),
                     options=frozen_mapping({"settle_s": 1.0, "poll_s": 0.02, **options}))


def test_a_command_that_would_put_the_secret_on_its_command_line_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_SECRET_CMD", "cmd-s3cret")
    for template in ('snmpset -c "$REPROFLEET_POWER_SECRET" pdu 1', "tool --pw ${REPROFLEET_POWER_SECRET}",
                     'tool --pw "$(printenv REPROFLEET_POWER_SECRET)"', "tool --pw `printenv REPROFLEET_POWER_SECRET`",
                     "tool --pw \"$(awk 'BEGIN{print ENVIRON[\"REPROFLEET_POWER_SECRET\"]}')\""):
        with pytest.raises(PowerConfigError, match=r"on_command names REPROFLEET_POWER_SECRET, which can put the "
                                                   r"secret on a command line"):
            driver_for(command_port(on_command=template, off_command="true"), "ws01", PowerLog(None))
    driver_for(command_port(on_command="tool --pw-from-env REPROFLEET_POWER_SECRETS_DIR", off_command="true"),
               "ws01", PowerLog(None))  # another variable's name is not this one
    with pytest.raises(PowerConfigError, match=r"names IPMI_PASSWORD, which can put the secret on a command line"):
        driver_for(command_port(on_command="ipmitool -P $IPMI_PASSWORD", off_command="true",
                                secret_env="IPMI_PASSWORD"), "ws01", PowerLog(None))


def test_a_command_gets_the_secret_in_the_variable_it_reads_or_on_stdin(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_SECRET_CMD", "cmd-s3cret")
    state = tmp_path / "state"
    state.write_text("on\n")
    tool = tmp_path / "tool.sh"  # a tool that reads the variable itself (as ipmitool -E does)
    tool.write_text(f"[ \"$IPMI_PASSWORD\" = cmd-s3cret ] && echo on > {state}\n")
    by_env = driver_for(command_port(
        on_command=f"sh {tool}",
        off_command=f"echo off > {state}", status_command=f"cat {state}", secret_env="IPMI_PASSWORD"),
        "ws01", PowerLog(None))
    assert by_env.cycle(0.01) is PowerState.ON
    by_stdin = driver_for(command_port(
        on_command=f"read -r pw && [ \"$(printf %s \"$pw\" | md5sum)\" = \"$(printf cmd-s3cret | md5sum)\" ] "
                   f"&& echo on > {state}",
        off_command=f"echo off > {state}", status_command=f"cat {state}", secret_stdin=True),
        "ws01", PowerLog(None))
    assert by_stdin.off() is PowerState.OFF
    assert by_stdin.on() is PowerState.ON
