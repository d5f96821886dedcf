"""Wall power at a freeze and the BMC's log, from the sampler to the record to the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reprofleet.model import PowerPort
from reprofleet.power.base import PowerDriver, PowerState
from reprofleet.power.log import PowerLog
from reprofleet.power.wall import WallPowerSampler, freeze_telemetry, freeze_trace
from reprofleet.report.evidence import bmc_words, wall_at_freeze, wall_words
from reprofleet.report.freeze import freeze_html, freeze_svg, load_trace
from reprofleet.report.markdown import _wedges


class Meter(PowerDriver):
    """A driver whose outlet reads the next value of a list (None: no reading)."""

    name = "fake"

    def __init__(self, readings: list[float | None], meters: bool = True) -> None:
        super().__init__(PowerPort(driver="fake", address="10.0.0.9", outlet="1"), "ws01", PowerLog(None))
        self.readings = list(readings)
        self.meters_power = meters

    def _set(self, state: PowerState) -> None:
        raise NotImplementedError

    def _read(self) -> PowerState:
        return PowerState.ON

    def _read_power(self) -> float | None:
        return self.readings.pop(0) if self.readings else None


def test_the_freeze_trace_is_the_last_minute_before_the_silence_and_what_followed_it() -> None:
    lines = [{"t": 1000.0 + i, "w": 400.0 + i} for i in range(100)]  # 1000 .. 1099
    trace = freeze_trace(lines, silent_since=1090.0)
    assert trace[0] == [-60.0, 430.0] and trace[-1] == [9.0, 499.0]
    assert len(trace) == 70


def test_two_outlets_are_summed_per_tick_and_a_tick_with_a_missing_outlet_is_left_out() -> None:
    written: list[dict[str, Any]] = []
    sampler = WallPowerSampler([Meter([200.0, 210.0, 220.0]), Meter([150.0, None, 160.0])], written.append)
    for _ in range(3):
        sampler.sample_once()
    silent = written[-1]["t"]
    assert [w for _, w in sampler.freeze_trace(silent)] == [350.0, 380.0]
    assert len(written) == 5  # every reading still goes into the stream


def test_a_wedge_on_a_device_that_does_not_meter_says_so_plainly() -> None:
    sampler = WallPowerSampler([Meter([], meters=False)], lambda line: None)
    assert freeze_telemetry(sampler, 1000.0) == {"wall_note": "wall power not measured: fake 10.0.0.9 does not meter power"}
    bare = WallPowerSampler([], lambda line: None)
    assert "no power device" in freeze_telemetry(bare, 1000.0)["wall_note"]
    silent = WallPowerSampler([Meter([None, None])], lambda line: None)
    silent.sample_once()
    assert "gave no wall-power reading" in freeze_telemetry(silent, 1000.0)["wall_note"]
    assert freeze_telemetry(None, 1000.0) == {}


def wedge_record(**telemetry: Any) -> dict[str, Any]:
    return {"attempt": "a1", "host": "ws01", "cell": "default", "outcome": "wedge", "started": "2026-11-30T18:00:00Z",
            "stream": "streams/a1.jsonl", "detect_latency_s": 3.2, "last_phase": "cuda_graph_capture",
            "last_log_line": "Capturing CUDA graphs", "telemetry": telemetry,
            "forensics": {"previous_boot_available": True, "findings": []}}


def test_the_wall_power_is_told_at_the_freeze_over_the_minute_and_after_it_beside_nvml() -> None:
    record = wedge_record(wall_trace=[[-2.0, 410.0], [-1.0, 455.0], [0.0, 452.0], [3.0, 451.0]],
                          last_sample={"power_w": 301.4})
    assert wall_words(wall_at_freeze(record)) == ("452 W at the freeze (last minute 410–455 W), 451 W 3 s after it; "
                                                  "GPU (NVML) last 301 W")
    assert wall_words(wall_at_freeze(wedge_record(wall_note="wall power not measured: x"))) == \
        "wall power not measured: x"
    assert wall_words(wall_at_freeze(wedge_record())) == "—"  # a record from before wall traces


def test_the_bmc_log_is_told_worst_first_and_its_absence_is_not_invented() -> None:
    events = [{"time": "t1", "severity": "OK", "message": "power off", "source": "s"},
              {"time": "t0", "severity": "Critical", "message": "PCIe fatal", "source": "s"},
              {"time": "t2", "severity": "OK", "message": "power on", "source": "s"}]
    assert bmc_words({"bmc_events": events}) == "3 entries: Critical: PCIe fatal; OK: power off; …"
    assert bmc_words({}) == "—"
    assert bmc_words({"bmc_events": [], "bmc_notes": ["refused"]}) == "no entries (refused)"


def test_the_wedge_table_has_the_wall_power_and_bmc_columns() -> None:
    record = wedge_record(wall_trace=[[-1.0, 455.0]])
    record["forensics"]["bmc_events"] = [{"time": "t", "severity": "Critical", "message": "PCIe | fatal", "source": "s"}]
    table = _wedges([record])
    assert table[0].endswith("| wall power | BMC event log |")
    # a BMC event's message is the host's (ipmitool sel add): a code span, its | escaped for the table
    assert table[2].endswith("| 455 W at the freeze (last minute 455–455 W) | `1 entries: Critical: PCIe \\| fatal` |")


def test_the_figure_ends_at_the_hosts_last_line_not_at_the_controllers_last_wall_reading(tmp_path: Path) -> None:
    stream = tmp_path / "a1.jsonl"
    lines = [{"t": 100.0 + i, "k": "nvml", "gfx_mhz": 2800, "power_w": 300, "temp_c": 70} for i in range(10)]
    lines += [{"t": 100.0 + i, "k": "wall", "w": 450.0, "source": "tasmota"} for i in range(20)]  # past the freeze
    stream.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    record = wedge_record(wall_trace=[[-3.0, 450.0], [5.0, 449.0]])
    trace = load_trace(record, stream)
    power = next(s for s in trace.series if s.key == "power_w")
    assert power.times[-1] == 0.0  # the host's last sample is the silence
    svg = freeze_svg(trace)
    assert "wall (PDU/BMC)" in svg and "GPU (NVML)" in svg
    page = freeze_html(trace, record, svg)
    assert "wall power: 450 W at the freeze" in page


def test_a_figure_of_a_host_whose_device_does_not_meter_says_so(tmp_path: Path) -> None:
    stream = tmp_path / "a1.jsonl"
    stream.write_text(json.dumps({"t": 100.0, "k": "nvml", "gfx_mhz": 2800, "power_w": 300, "temp_c": 70}) + "\n")
    record = wedge_record(wall_note="wall power not measured: snmp 10.0.0.2 does not meter power")
    svg = freeze_svg(load_trace(record, stream))
    assert "does not meter power" in svg


def test_a_wedges_block_lists_the_bmc_entries_and_why_some_are_missing(tmp_path: Path) -> None:
    stream = tmp_path / "a1.jsonl"
    stream.write_text(json.dumps({"t": 100.0, "k": "nvml", "gfx_mhz": 2800, "power_w": 300, "temp_c": 70}) + "\n")
    record = wedge_record()
    record["forensics"]["bmc_events"] = [{"time": "2026-11-30T18:00:05.000Z", "severity": "Critical",
                                          "message": "Bus <fatal> error", "source": "ipmi SEL 10.0.0.5"}]
    record["forensics"]["bmc_notes"] = ["redfish 10.0.0.6: event log not read: connection refused"]
    page = freeze_html(load_trace(record, stream), record, None)
    assert "BMC event log since the attempt started: 1 entries: Critical: Bus &lt;fatal&gt; error" in page
    assert "2026-11-30T18:00:05.000Z  Critical  Bus &lt;fatal&gt; error  [ipmi SEL 10.0.0.5]" in page
    assert "note: redfish 10.0.0.6: event log not read: connection refused" in page
    assert "BMC event log" not in freeze_html(load_trace(wedge_record(), stream), wedge_record(), None)
