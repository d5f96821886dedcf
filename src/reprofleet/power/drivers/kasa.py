"""TP-Link Kasa and Tapo smart plugs and power strips, through python-kasa.

Selected by an inventory ``pdu:`` block like::

    pdu:
      driver: kasa
      address: 10.0.0.43            # or 10.0.0.43:9999 / 10.0.0.43:80
      transport: klap               # klap: Tapo, and Kasa firmware from 2023 on; xor: older Kasa (TCP 9999)
      # family: smart               # with klap: smart (Tapo, the default) or iot (Kasa JSON over KLAP, e.g. HS100 v4.1)
      outlet: 2                     # a strip's socket: its position (1 = first) or its child id; absent: the plug
      credentials: file:~/.config/reprofleet/tplink   # "you@example.com:password" of the TP-Link account (klap only)
      # timeout_s: 5  settle_s: 10  poll_s: 0.25   (every driver)

``kasa discover`` (python-kasa's command line) prints each device's connection type (family and
encryption). KLAP needs the TP-Link cloud account the plug was set up with, even on the LAN: the device proves it knows
the account in the handshake and refuses any other (an ``AuthenticationError``, reported as the
account refused, never retried). The legacy protocol has no credentials at all (anyone on the LAN
can switch the plug), so none may be given for it.

Requests (python-kasa's ``IotProtocol``/``SmartProtocol`` over ``XorTransport``/``KlapTransport``,
``KlapTransportV2``): Kasa (IOT) reads ``system.get_sysinfo`` (``relay_state``, or a strip's
``children[].state`` by ``id``) and switches with ``system.set_relay_state {state}``, with
``context.child_ids`` for a strip's socket; Tapo (SMART) reads ``get_device_info`` (``device_on``)
or a strip's ``get_child_device_list`` (``device_id``, ``position``, ``device_on``) and switches
with ``set_device_info {device_on}``, through ``control_child`` for a strip's socket.

A cycle is the controller's: off, read back off, dwell, on, read back on. The plugs' own
countdown rules (IOT ``count_down.add_rule``, SMART ``add_countdown_rule``) are not reached through
python-kasa's documented API, so a controller that dies in the dwell leaves the outlet off until
the next run switches it on.
"""

from __future__ import annotations

from typing import Any

from reprofleet.credentials import Secret, split_user_password
from reprofleet.errors import PowerError
from reprofleet.model import PowerPort
from reprofleet.power.base import PowerDriver, PowerState, TransientPowerError
from reprofleet.power.drivers.kasa_link import KLAP_PORT, XOR_PORT, KasaEndpoint, KasaLink
from reprofleet.power.drivers.kasa_settings import iot_settings, smart_settings
from reprofleet.power.drivers.snmp import split_host_port
from reprofleet.power.log import PowerLog
from reprofleet.power.options import PowerConfigError
from reprofleet.power.plug_behaviour import PlugSettings

TRANSPORTS = ("klap", "xor")
FAMILIES = ("smart", "iot")


def _iot_error(reply: Any, what: str) -> None:
    if isinstance(reply, dict) and reply.get("err_code", 0) != 0:
        raise PowerError(f"{what}: the device answered err_code {reply.get('err_code')} ({reply.get('err_msg', '')})")


def parse_sysinfo(answer: dict[str, Any], child: str | None) -> PowerState:
    """An IOT ``get_sysinfo`` answer -> the plug's (or the strip socket's, by id) state."""
    info = answer.get("system", {}).get("get_sysinfo") if isinstance(answer.get("system"), dict) else None
    _iot_error(info, "get_sysinfo")
    if not isinstance(info, dict):
        raise PowerError(f"get_sysinfo: no sysinfo in {str(answer)[:120]!r}")
    if child is None:
        state = info.get("relay_state")
    else:
        match = [c for c in info.get("children") or [] if isinstance(c, dict) and c.get("id") == child]
        if not match:
            raise PowerError(f"the strip has no socket {child}")
        state = match[0].get("state")
    if state not in (0, 1) or isinstance(state, bool):
        raise PowerError(f"get_sysinfo: no relay state ({state!r})")
    return PowerState.ON if state == 1 else PowerState.OFF


def iot_children(answer: dict[str, Any]) -> list[str]:
    info = answer.get("system", {}).get("get_sysinfo") if isinstance(answer.get("system"), dict) else None
    children = info.get("children") if isinstance(info, dict) else None
    return [str(c.get("id")) for c in children or [] if isinstance(c, dict)]


def smart_children(answer: dict[str, Any]) -> list[dict[str, Any]]:
    result = answer.get("get_child_device_list")
    children = result.get("child_device_list") if isinstance(result, dict) else None
    if not isinstance(children, list):
        raise PowerError(f"get_child_device_list: no child list in {str(answer)[:120]!r}")
    return [c for c in children if isinstance(c, dict)]


def device_on(info: Any, what: str) -> PowerState:
    value = info.get("device_on") if isinstance(info, dict) else None
    if not isinstance(value, bool):
        raise PowerError(f"{what}: no device_on in the answer")
    return PowerState.ON if value else PowerState.OFF


def pick_child(ids_by_position: list[tuple[int, str]], outlet: str) -> str:
    """A strip's socket by 1-based position or by id -> its id."""
    for position, child in ids_by_position:
        if outlet == child or (outlet.isdigit() and int(outlet) == position):
            return child
    known = ", ".join(f"{p} ({c})" for p, c in ids_by_position) or "none"
    raise PowerError(f"the strip has no socket {outlet}; its sockets: {known}")


class KasaDriver(PowerDriver):
    name = "kasa"
    option_names = ("transport", "family")

    def __init__(self, port: PowerPort, host: str, log: PowerLog, *, secret: Secret | None = None) -> None:
        super().__init__(port, host, log, secret=secret)
        transport = self.options.choice("transport", TRANSPORTS, None)
        if transport is None:
            raise PowerConfigError(f"{self.where}: pdu option transport is required: klap (Tapo, Kasa firmware from "
                                   "2023 on) or xor (older Kasa); `kasa discover` tells", field="transport")
        family = self.options.choice("family", FAMILIES, "smart" if transport == "klap" else "iot") or "iot"
        if transport == "xor" and family != "iot":
            raise PowerConfigError(f"{self.where}: the xor transport speaks Kasa's iot family only", field="family")
        user, password = None, None
        if transport == "klap":
            if not secret:
                raise PowerConfigError(f"{self.where}: KLAP needs the TP-Link account the plug was set up with: "
                                       "credentials: env:VAR or file:/path holding e-mail:password",
                                       field="credentials")
            user, password = split_user_password(secret, "")
            self._secrets.append(password)
        elif secret:
            raise PowerConfigError(f"{self.where}: the xor transport takes no credentials (it has none)",
                                   field="credentials")
        address, port_number = split_host_port(port.address, XOR_PORT if transport == "xor" else KLAP_PORT)
        self._device = f"{address.lower()}:{port_number}"
        self.outlet = str(port.outlet) if port.outlet is not None else None
        self.family = family
        self.link = KasaLink(KasaEndpoint(address, port_number, transport, family, self.settings.timeout_s),
                             user, password)
        self._child: str | None = None

    @property
    def device_key(self) -> str:
        """One lock per device: its host and port (9999 or 80 filled in)."""
        return f"{self.name}:{self._device}"

    def _child_id(self) -> str | None:
        """The strip socket's id (asked once: a position becomes the id the device uses), or None."""
        if self.outlet is None or self._child is not None:
            return self._child
        if self.family == "iot":
            ids = iot_children(self.link.query({"system": {"get_sysinfo": {}}}, "get_sysinfo"))
            self._child = pick_child(list(enumerate(ids, start=1)), self.outlet)
        else:
            children = smart_children(self.link.query({"get_child_device_list": {}}, "get_child_device_list"))
            self._child = pick_child([(int(c.get("position") or 0), str(c.get("device_id"))) for c in children],
                                     self.outlet)
        return self._child

    def _read(self) -> PowerState:
        child = self._child_id()
        if self.family == "iot":
            return parse_sysinfo(self.link.query({"system": {"get_sysinfo": {}}}, "get_sysinfo"), child)
        if child is None:
            return device_on(self.link.query({"get_device_info": {}}, "get_device_info").get("get_device_info"),
                             "get_device_info")
        children = smart_children(self.link.query({"get_child_device_list": {}}, "get_child_device_list"))
        match = [c for c in children if c.get("device_id") == child]
        if not match:
            raise PowerError(f"the strip no longer lists socket {child}")
        return device_on(match[0], "get_child_device_list")

    def _read_plug_settings(self) -> PlugSettings:
        """The plug's own behaviour (kasa_settings.py); an answer the model does not give is not reported."""
        child = self._child_id()
        if self.family == "iot":
            request: dict[str, Any] = {"count_down": {"get_rules": {}}}
            if child is not None:
                request["context"] = {"child_ids": [child]}
            return iot_settings(self._optional(request, "count_down.get_rules"))
        if child is not None:  # a strip's socket: what its child entry says; the strip's timers are per app
            children = smart_children(self.link.query({"get_child_device_list": {}}, "get_child_device_list"))
            match = [c for c in children if c.get("device_id") == child]
            return smart_settings(match[0] if match else None, None, None)
        info = self._optional({"get_device_info": {}}, "get_device_info")
        auto_off = self._optional({"get_auto_off_config": {"start_index": 0}}, "get_auto_off_config")
        protection = self._optional({"get_protection_power": {}}, "get_protection_power")
        return smart_settings((info or {}).get("get_device_info"), (auto_off or {}).get("get_auto_off_config"),
                              (protection or {}).get("get_protection_power"))

    def _optional(self, request: dict[str, Any], what: str) -> dict[str, Any] | None:
        """A settings request a model may not know: its refusal is "not reported", never a failure."""
        try:
            return self.link.query(request, what)
        except TransientPowerError:
            raise  # no answer: the base driver retries, and a dead device is an error, not "unknown"
        except PowerError:
            return None

    def _set(self, state: PowerState) -> None:
        on = state is PowerState.ON
        child = self._child_id()
        if self.family == "iot":
            request: dict[str, Any] = {"system": {"set_relay_state": {"state": int(on)}}}
            if child is not None:
                request["context"] = {"child_ids": [child]}
            answer = self.link.query(request, "set_relay_state")
            _iot_error(answer.get("system", {}).get("set_relay_state"), "set_relay_state")
        elif child is None:
            self.link.query({"set_device_info": {"device_on": on}}, "set_device_info")
        else:
            inner = {"method": "set_device_info", "params": {"device_on": on}}
            answer = self.link.query({"control_child": {"device_id": child, "requestData": inner}}, "control_child")
            reply = answer.get("control_child")
            data = reply.get("responseData") if isinstance(reply, dict) else None
            if not isinstance(data, dict) or data.get("error_code") != 0:
                raise PowerError(f"control_child: the strip refused to switch socket {child}: {data!r}")
