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
- Reboot durations: ``rPDUOutletConfigRebootDuration`` 1.3.6.1.4.1.318.1.1.12.3.4.1.1.6.<n>
  (rPDUOutletConfigEntry 6, read-write, "any value between 5 and 60 seconds");
  ``sPDUOutletRebootDuration`` 1.3.6.1.4.1.318.1.1.4.5.2.1.5.<n> (sPDUOutletConfigEntry 5,
  read-write, 5/10/15/20/30/45/60: "a value other than a supported value ... the next lower
  acceptable value", below the lowest the lowest). ``immediateReboot`` (3) is "an
  immediateOff command, wait the ... RebootDuration OID time, and then ... immediateOn".

APC rPDU2 (AP84xx/86xx/88xx/89xx), whose PDUs can be daisy-chained (Network Port
Sharing): every outlet table is indexed by one flat index across the chain, and each row
says which PDU and which outlet it is in its Module ("the user-defined Rack PDU numeric
ID") and Number ("the numeric switched outlet ID") columns. The MIB defines no formula for
the index; a client finds the row by those two columns. rPDU2Outlet is
1.3.6.1.4.1.318.1.1.26.9:
- ``rPDU2OutletSwitchedConfigEntry`` .2.1.1: Index(1) Module(2) Name(3) Number(4)
  PowerOnTime(5) PowerOffTime(6) RebootDuration(7, read-write, "Range 5-60 seconds");
- ``rPDU2OutletSwitchedStatusEntry`` .2.3.1: Index(1) Module(2) Name(3) Number(4)
  State(5, read-only: off(1) on(2) -- the reverse of the rPDU table's values);
- ``rPDU2OutletSwitchedControlEntry`` .2.4.1: Index(1) Module(2) Name(3) Number(4)
  Command(5, read-write: immediateOn(1) immediateOff(2) immediateReboot(3) outletUnknown(4)
  delayedOn(5) delayedOff(6) delayedReboot(7) cancelPendingCommand(8));
- ``rPDU2OutletMeteredStatusEntry`` .4.3.1: Index(1) Module(2) Name(3) Number(4) ... Power(7).
The legacy rPDU and sPDU tables describe the first PDU of the chain only.

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
    MODULE = "module"  # read-only: which PDU of the chain the row is (rPDU2)
    NUMBER = "number"  # read-only: the outlet's number on its PDU (rPDU2)
    REBOOT_TIME = "reboot_time"  # read-write: seconds an immediateReboot keeps the outlet off


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
    chained: bool = False  # the row index is a flat index over every outlet of the chain (rPDU2)
    low: int = 0  # REBOOT_TIME: a SET outside low..high is wrongValue ...
    high: int = 0
    choices: tuple[int, ...] = ()  # ... or, where given, rounds down to one of these (sPDU)


def oid(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


APC_SPDU = (
    MibColumn(oid("1.3.6.1.4.1.318.1.1.4.4.2.1.3"), Column.CONTROL, on=1, off=2, reboot=3,
              allowed=(1, 2, 3, 5, 6, 7)),
    MibColumn(oid("1.3.6.1.4.1.318.1.1.4.5.2.1.5"), Column.REBOOT_TIME, choices=(5, 10, 15, 20, 30, 45, 60)),
)
RPDU2_CONFIG, RPDU2_STATUS, RPDU2_CONTROL = (f"1.3.6.1.4.1.318.1.1.26.9.2.{table}.1" for table in (1, 3, 4))
RPDU2_METERED = "1.3.6.1.4.1.318.1.1.26.9.4.3.1"
# rPDU2OutletMeteredStatusPower: an rPDU2 table (flat index), which metered rPDU models serve too
RPDU2_WATTS = MibColumn(oid(f"{RPDU2_METERED}.7"), Column.WATTS, chained=True)
APC_RPDU = (
    MibColumn(oid("1.3.6.1.4.1.318.1.1.12.3.3.1.1.4"), Column.CONTROL, on=1, off=2, reboot=3,
              allowed=(1, 2, 3, 4, 5, 6, 7)),
    MibColumn(oid("1.3.6.1.4.1.318.1.1.12.3.5.1.1.4"), Column.STATE, on=1, off=2),
    MibColumn(oid("1.3.6.1.4.1.318.1.1.12.3.4.1.1.6"), Column.REBOOT_TIME, low=5, high=60),
    RPDU2_WATTS,
)


def _row_ids(entry: str) -> tuple[MibColumn, MibColumn]:
    return (MibColumn(oid(f"{entry}.2"), Column.MODULE, chained=True),
            MibColumn(oid(f"{entry}.4"), Column.NUMBER, chained=True))


APC_RPDU2 = (
    *_row_ids(RPDU2_CONFIG),
    MibColumn(oid(f"{RPDU2_CONFIG}.7"), Column.REBOOT_TIME, low=5, high=60, chained=True),
    *_row_ids(RPDU2_STATUS),
    MibColumn(oid(f"{RPDU2_STATUS}.5"), Column.STATE, on=2, off=1, chained=True),
    *_row_ids(RPDU2_CONTROL),
    MibColumn(oid(f"{RPDU2_CONTROL}.5"), Column.CONTROL, on=1, off=2, reboot=3, allowed=(1, 2, 3, 5, 6, 7, 8),
              chained=True),
    *_row_ids(RPDU2_METERED),
    RPDU2_WATTS,
)
RARITAN_PX = (
    MibColumn(oid("1.3.6.1.4.1.13742.6.4.1.2.1.2"), Column.CONTROL, on=1, off=0, reboot=2, allowed=(0, 1, 2),
              by_pdu=True),
    MibColumn(oid("1.3.6.1.4.1.13742.6.4.1.2.1.3"), Column.STATE, on=7, off=8, by_pdu=True),
    MibColumn(oid("1.3.6.1.4.1.13742.6.5.4.3.1.4"), Column.WATTS, suffix=(5,), by_pdu=True),
)
FAMILIES = {"apc_spdu": APC_SPDU, "apc_rpdu": APC_RPDU, "apc_rpdu2": APC_RPDU2, "raritan_px": RARITAN_PX}

SYSTEM = {
    oid("1.3.6.1.2.1.1.1.0"): "APC Web/SNMP Management Card (MB:v4.4.0 PF:v6.9.6 AOS) (reprofleet simulator)",
    oid("1.3.6.1.2.1.1.5.0"): "rf-sim-pdu",
}
