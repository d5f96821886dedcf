"""Outlet-control OIDs of SNMP PDUs, as data: one row per PDU family.

Adding a PDU family is adding a row, not a code branch. ``{outlet}`` and ``{pdu}`` in an
OID are filled from the inventory's ``outlet`` and the ``pdu_id`` option.

Sources:
- APC PowerNet-MIB, switched rack PDU (rPDU): ``rPDUOutletControlOutletCommand``
  1.3.6.1.4.1.318.1.1.12.3.3.1.1.4.<outlet> (immediateOn 1, immediateOff 2,
  immediateReboot 3) and ``rPDUOutletStatusOutletState`` 1.3.6.1.4.1.318.1.1.12.3.5.1.1.4.<outlet>
  (outletStatusOn 1, outletStatusOff 2).
- APC PowerNet-MIB, MasterSwitch (sPDU): ``sPDUOutletCtl`` 1.3.6.1.4.1.318.1.1.4.4.2.1.3.<outlet>
  (outletOn 1, outletOff 2, outletReboot 3); reading it returns the outlet state.
- Raritan PX2/PX3 PDU2-MIB: ``switchingOperation`` 1.3.6.1.4.1.13742.6.4.1.2.1.2.<pduId>.<outletId>
  (off 0, on 1, cycle 2; read-write) and ``outletSwitchingState``
  1.3.6.1.4.1.13742.6.4.1.2.1.3.<pduId>.<outletId>, a SensorStateEnumeration read as
  on 7 / off 8 (PDU2-MIB; also Network UPS Tools' raritan-px2-mib.c). ``pduId`` is 1
  unless PDUs are daisy-chained.
- Outlet power (watts): APC ``rPDU2OutletMeteredStatusPower`` 1.3.6.1.4.1.318.1.1.26.9.4.3.1.7.<outlet>
  (metered rPDU2 models); Raritan ``measurementsOutletSensorValue``
  1.3.6.1.4.1.13742.6.5.4.3.1.4.<pduId>.<outletId>.5 (sensor type 5, activePower).
- Reboot durations (what ``immediateReboot`` waits between its off and its on): APC
  ``rPDUOutletConfigRebootDuration`` 1.3.6.1.4.1.318.1.1.12.3.4.1.1.6.<outlet> (read-write, 5..60 s),
  ``sPDUOutletRebootDuration`` 1.3.6.1.4.1.318.1.1.4.5.2.1.5.<outlet> (read-write, one of
  5/10/15/20/30/45/60; another value is taken as the next lower one),
  ``rPDU2OutletSwitchedConfigRebootDuration`` 1.3.6.1.4.1.318.1.1.26.9.2.1.1.7.<index> (5..60 s).
- Daisy-chained APC PDUs (Network Port Sharing, rPDU2 models AP84xx/86xx/88xx/89xx): the
  rPDU2 outlet tables (rPDU2OutletSwitchedControlEntry 1.3.6.1.4.1.318.1.1.26.9.2.4.1,
  ...StatusEntry .2.3.1, ...ConfigEntry .2.1.1, rPDU2OutletMeteredStatusEntry .4.3.1) number
  every outlet of the chain with one flat index; each row's Module column (2, "the
  user-defined Rack PDU numeric ID") and Number column (4, "the numeric switched outlet ID")
  say which it is. The MIB gives no formula for the index, so the driver finds the row by
  those columns. rPDU2OutletSwitchedControlCommand (5) takes immediateOn 1, immediateOff 2,
  immediateReboot 3; rPDU2OutletSwitchedStatusState (5) reads off 1, on 2 (the reverse of the
  rPDU table). The rPDU and sPDU tables describe the first PDU of a chain only; sPDU
  (MasterSwitch) PDUs cannot be chained at all.
"""

from __future__ import annotations

import re

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from reprofleet.power.device_cycle import choice_at_least, seconds_at_least


@dataclass(frozen=True)
class RebootTime:
    """Where an outlet's reboot duration is kept, and what the PDU takes there."""

    oid: str  # template, like the row's other OIDs
    low: int = 5
    high: int = 60
    choices: tuple[int, ...] = ()  # discrete values only (sPDU); empty: any whole second in low..high

    def at_least(self, dwell_s: float) -> int | None:
        """The value that keeps the outlet off at least ``dwell_s``; None when the PDU cannot."""
        if self.choices:
            return choice_at_least(dwell_s, self.choices)
        return seconds_at_least(dwell_s, self.low, self.high)

    @property
    def longest(self) -> int:
        return max(self.choices) if self.choices else self.high


@dataclass(frozen=True)
class ChainTable:
    """An rPDU2 outlet table: one flat index over a chain's outlets, rows told apart by two columns."""

    entry: str  # the table entry's OID; a column is <entry>.<n>, a cell <entry>.<n>.<index>
    module_column: int = 2  # the PDU's numeric id
    number_column: int = 4  # the outlet's number on its PDU

    def column(self, number: int) -> str:
        return f"{self.entry}.{number}"


@dataclass(frozen=True)
class OutletOids:
    """How one PDU family switches and reports an outlet over SNMP."""

    model: str
    control_oid: str  # template: {outlet}, {pdu}; a chain model's {control}/{status}/{config}/{metered} row
    status_oid: str  # template; may equal control_oid when reading control gives the state
    set_on: int
    set_off: int
    state_on: int
    state_off: int
    set_cycle: int | None = None  # the device's own reboot command (never trusted unread)
    mib: str = ""
    power_oid: str | None = None  # template: the outlet's metered draw in watts, where the PDU meters it
    reboot: RebootTime | None = None  # where set_cycle's off time is kept
    tables: Mapping[str, ChainTable] = field(default_factory=dict)  # a chain model: template field -> its table
    chain_model: str | None = None  # the row that addresses a daisy-chained PDU (pdu_id > 1)

    @property
    def addresses_pdu(self) -> bool:
        """Can this row name a PDU other than the first (a chain index, or Raritan's pduId)?"""
        return bool(self.tables) or "{pdu}" in self.control_oid

    def fill(self, template: str, outlet: str, pdu: str = "1", rows: Mapping[str, int] | None = None) -> str:
        return template.format(outlet=outlet, pdu=pdu, **{name: str(index) for name, index in (rows or {}).items()})

    def power(self, outlet: str, pdu: str = "1", rows: Mapping[str, int] | None = None) -> str | None:
        return self.fill(self.power_oid, outlet, pdu, rows) if self.power_oid else None

    def control(self, outlet: str, pdu: str = "1", rows: Mapping[str, int] | None = None) -> str:
        return self.fill(self.control_oid, outlet, pdu, rows)

    def status(self, outlet: str, pdu: str = "1", rows: Mapping[str, int] | None = None) -> str:
        return self.fill(self.status_oid, outlet, pdu, rows)


RPDU2 = "1.3.6.1.4.1.318.1.1.26.9"  # PowerNet-MIB rPDU2Outlet
RPDU2_TABLES = MappingProxyType({
    "control": ChainTable(f"{RPDU2}.2.4.1"),  # rPDU2OutletSwitchedControlEntry
    "status": ChainTable(f"{RPDU2}.2.3.1"),  # rPDU2OutletSwitchedStatusEntry
    "config": ChainTable(f"{RPDU2}.2.1.1"),  # rPDU2OutletSwitchedConfigEntry
    "metered": ChainTable(f"{RPDU2}.4.3.1"),  # rPDU2OutletMeteredStatusEntry
})

OUTLET_MODELS: Mapping[str, OutletOids] = MappingProxyType({
    "apc_rpdu": OutletOids(
        model="apc_rpdu",
        control_oid="1.3.6.1.4.1.318.1.1.12.3.3.1.1.4.{outlet}",
        status_oid="1.3.6.1.4.1.318.1.1.12.3.5.1.1.4.{outlet}",
        set_on=1, set_off=2, state_on=1, state_off=2, set_cycle=3,
        mib="PowerNet-MIB rPDUOutletControlOutletCommand / rPDUOutletStatusOutletState",
        power_oid="1.3.6.1.4.1.318.1.1.26.9.4.3.1.7.{outlet}",
        reboot=RebootTime("1.3.6.1.4.1.318.1.1.12.3.4.1.1.6.{outlet}", 5, 60),
        chain_model="apc_rpdu2",
    ),
    "apc_rpdu2": OutletOids(
        model="apc_rpdu2",
        control_oid=f"{RPDU2}.2.4.1.5.{{control}}",
        status_oid=f"{RPDU2}.2.3.1.5.{{status}}",
        set_on=1, set_off=2, state_on=2, state_off=1, set_cycle=3,
        mib="PowerNet-MIB rPDU2OutletSwitchedControlCommand / rPDU2OutletSwitchedStatusState",
        power_oid=f"{RPDU2}.4.3.1.7.{{metered}}",
        reboot=RebootTime(f"{RPDU2}.2.1.1.7.{{config}}", 5, 60),
        tables=RPDU2_TABLES,
    ),
    "apc_spdu": OutletOids(
        model="apc_spdu",
        control_oid="1.3.6.1.4.1.318.1.1.4.4.2.1.3.{outlet}",
        status_oid="1.3.6.1.4.1.318.1.1.4.4.2.1.3.{outlet}",
        set_on=1, set_off=2, state_on=1, state_off=2, set_cycle=3,
        mib="PowerNet-MIB sPDUOutletCtl",
        reboot=RebootTime("1.3.6.1.4.1.318.1.1.4.5.2.1.5.{outlet}", choices=(5, 10, 15, 20, 30, 45, 60)),
    ),
    "raritan_px": OutletOids(
        model="raritan_px",
        control_oid="1.3.6.1.4.1.13742.6.4.1.2.1.2.{pdu}.{outlet}",
        status_oid="1.3.6.1.4.1.13742.6.4.1.2.1.3.{pdu}.{outlet}",
        set_on=1, set_off=0, state_on=7, state_off=8, set_cycle=2,
        mib="PDU2-MIB switchingOperation / outletSwitchingState",
        power_oid="1.3.6.1.4.1.13742.6.5.4.3.1.4.{pdu}.{outlet}.5",
    ),
})

GENERIC_MODEL = "generic"
MODEL_NAMES = (*OUTLET_MODELS, GENERIC_MODEL)


_TEMPLATE_PART = r"(?:[0-9]+|\{outlet\}|\{pdu\})"
OID_TEMPLATE = re.compile(rf"^\.?{_TEMPLATE_PART}(?:\.{_TEMPLATE_PART})+$")


def is_oid_template(text: str) -> bool:
    """A user's OID template: numbers and the placeholders ``{outlet}`` and ``{pdu}`` only,
    dot-separated. Any other ``{``, ``}`` or ``%`` is refused before ``str.format`` sees it
    (``{0}`` raised IndexError, ``{outlet.__class__}`` reads attributes, ``{outlet:>9999999}``
    allocates)."""
    return bool(OID_TEMPLATE.match(text))


def is_oid(text: str) -> bool:
    """Dotted numeric OID (a leading dot allowed), e.g. ``1.3.6.1.2.1.1.1.0``."""
    parts = text.lstrip(".").split(".")
    return len(parts) >= 2 and all(part.isdigit() for part in parts)
