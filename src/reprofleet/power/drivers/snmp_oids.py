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
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping


@dataclass(frozen=True)
class OutletOids:
    """How one PDU family switches and reports an outlet over SNMP."""

    model: str
    control_oid: str  # template: {outlet}, {pdu}
    status_oid: str  # template; may equal control_oid when reading control gives the state
    set_on: int
    set_off: int
    state_on: int
    state_off: int
    set_cycle: int | None = None  # the device's own reboot command (never trusted unread)
    mib: str = ""
    power_oid: str | None = None  # template: the outlet's metered draw in watts, where the PDU meters it

    def power(self, outlet: str, pdu: str = "1") -> str | None:
        return self.power_oid.format(outlet=outlet, pdu=pdu) if self.power_oid else None

    def control(self, outlet: str, pdu: str = "1") -> str:
        return self.control_oid.format(outlet=outlet, pdu=pdu)

    def status(self, outlet: str, pdu: str = "1") -> str:
        return self.status_oid.format(outlet=outlet, pdu=pdu)


OUTLET_MODELS: Mapping[str, OutletOids] = MappingProxyType({
    "apc_rpdu": OutletOids(
        model="apc_rpdu",
        control_oid="1.3.6.1.4.1.318.1.1.12.3.3.1.1.4.{outlet}",
        status_oid="1.3.6.1.4.1.318.1.1.12.3.5.1.1.4.{outlet}",
        set_on=1, set_off=2, state_on=1, state_off=2, set_cycle=3,
        mib="PowerNet-MIB rPDUOutletControlOutletCommand / rPDUOutletStatusOutletState",
        power_oid="1.3.6.1.4.1.318.1.1.26.9.4.3.1.7.{outlet}",
    ),
    "apc_spdu": OutletOids(
        model="apc_spdu",
        control_oid="1.3.6.1.4.1.318.1.1.4.4.2.1.3.{outlet}",
        status_oid="1.3.6.1.4.1.318.1.1.4.4.2.1.3.{outlet}",
        set_on=1, set_off=2, state_on=1, state_off=2, set_cycle=3,
        mib="PowerNet-MIB sPDUOutletCtl",
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


def is_oid(text: str) -> bool:
    """Dotted numeric OID (a leading dot allowed), e.g. ``1.3.6.1.2.1.1.1.0``."""
    parts = text.lstrip(".").split(".")
    return len(parts) >= 2 and all(part.isdigit() for part in parts)
