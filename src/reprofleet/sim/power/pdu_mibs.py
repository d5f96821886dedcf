"""What the simulated SNMP PDUs serve, copied from the vendors' MIBs by hand.

Written independently of ``reprofleet.power.drivers.snmp_oids`` on purpose: a simulator built
from the driver's own table would agree with a wrong OID. Every OID below is a literal
from the MIB text (object name in the comment); nothing is derived from the driver.

APC PowerNet-MIB (powernet443.mib):
- ``sPDUOutletCtl``                 1.3.6.1.4.1.318.1.1.4.4.2.1.3.<n>, read-write INTEGER
  outletOn(1) outletOff(2) outletReboot(3) outletUnknown(4) outletOnWithDelay(5)
  outletOffWithDelay(6) outletRebootWithDelay(7); reading it gives the outlet state.
- ``rPDUOutletControlOutletCommand`` 1.3.6.1.4.1.318.1.1.12.3.3.1.1.4.<n>, read-write INTEGER
  immediateOn(1) immediateOff(2) immediateReboot(3) delayedOn(4) delayedOff(5)
  delayedReboot(6) cancelPendingCommand(7); reading it gives immediateOn/immediateOff.
- ``rPDUOutletStatusOutletState``   1.3.6.1.4.1.318.1.1.12.3.5.1.1.4.<n>, read-only INTEGER
  outletStatusOn(1) outletStatusOff(2).
- ``rPDU2OutletMeteredStatusPower`` 1.3.6.1.4.1.318.1.1.26.9.4.3.1.7.<n>, read-only INTEGER,
  watts.

Raritan PDU2-MIB (PX2/PX3):
- ``switchingOperation``   1.3.6.1.4.1.13742.6.4.1.2.1.2.<pduId>.<outletId>, read-write
  off(0) on(1) cycle(2).
- ``outletSwitchingState`` 1.3.6.1.4.1.13742.6.4.1.2.1.3.<pduId>.<outletId>, read-only
  SensorStateEnumeration: on(7) off(8).
- ``measurementsOutletSensorValue`` 1.3.6.1.4.1.13742.6.5.4.3.1.4.<pduId>.<outletId>.<sensorType>,
  read-only Unsigned32; sensorType activePower(5), watts (0 decimal digits).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, unique


@unique
class Column(str, Enum):
    """What an OID of an outlet row does."""

    CONTROL = "control"  # read-write: a command; reads back the state in the control's own values
    STATE = "state"  # read-only
    WATTS = "watts"  # read-only


@dataclass(frozen=True)
class MibColumn:
    """One column of an outlet table: the OID prefix before the row index, and its values."""

    prefix: tuple[int, ...]
    column: Column
    on: int = 0
    off: int = 0
    reboot: int | None = None
    allowed: tuple[int, ...] = ()  # every value the MIB defines for a SET (others: wrongValue)
    suffix: tuple[int, ...] = ()  # after the outlet index (Raritan's sensor type)
    by_pdu: bool = False  # the row index is <pduId>.<outlet>


def oid(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


APC_SPDU = (
    MibColumn(oid("1.3.6.1.4.1.318.1.1.4.4.2.1.3"), Column.CONTROL, on=1, off=2, reboot=3,
              allowed=(1, 2, 3, 5, 6, 7)),
)
APC_RPDU = (
    MibColumn(oid("1.3.6.1.4.1.318.1.1.12.3.3.1.1.4"), Column.CONTROL, on=1, off=2, reboot=3,
              allowed=(1, 2, 3, 4, 5, 6, 7)),
    MibColumn(oid("1.3.6.1.4.1.318.1.1.12.3.5.1.1.4"), Column.STATE, on=1, off=2),
    MibColumn(oid("1.3.6.1.4.1.318.1.1.26.9.4.3.1.7"), Column.WATTS),
)
RARITAN_PX = (
    MibColumn(oid("1.3.6.1.4.1.13742.6.4.1.2.1.2"), Column.CONTROL, on=1, off=0, reboot=2, allowed=(0, 1, 2),
              by_pdu=True),
    MibColumn(oid("1.3.6.1.4.1.13742.6.4.1.2.1.3"), Column.STATE, on=7, off=8, by_pdu=True),
    MibColumn(oid("1.3.6.1.4.1.13742.6.5.4.3.1.4"), Column.WATTS, suffix=(5,), by_pdu=True),
)
FAMILIES = {"apc_spdu": APC_SPDU, "apc_rpdu": APC_RPDU, "raritan_px": RARITAN_PX}

SYSTEM = {
    oid("1.3.6.1.2.1.1.1.0"): "APC Web/SNMP Management Card (MB:v4.4.0 PF:v6.9.6 AOS) (reprofleet simulator)",
    oid("1.3.6.1.2.1.1.5.0"): "rf-sim-pdu",
}
