"""The simulated host's nvidia-smi: the real tool's messages and exit codes, state on disk."""

from __future__ import annotations

import json
import os

import pytest


def state(tree) -> dict:
    return json.loads((tree.hw / "gpu0.json").read_text())


def test_a_clock_lock_prints_what_the_real_tool_prints_and_is_stored(sim_host_tree) -> None:
    tree = sim_host_tree()
    result = tree.run(["nvidia-smi", "-i", "0", "-lgc", "180,2800"])
    assert result.returncode == 0
    assert result.stdout == 'GPU clocks set to "(gpuClkMin 180, gpuClkMax 2800)" for GPU 00000000:01:00.0\nAll done.\n'
    assert state(tree)["locked_graphics"] == [180, 2800]
    assert tree.run(["nvidia-smi", "--reset-gpu-clocks"]).stdout == "All done.\n"
    assert state(tree)["locked_graphics"] is None


def test_a_power_limit_inside_the_range_is_set_and_reports_the_previous_one(sim_host_tree) -> None:
    tree = sim_host_tree()
    result = tree.run(["nvidia-smi", "-pl", "350"])
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        "Power limit for GPU 00000000:01:00.0 was set to 350.00 W from 600.00 W.", "All done."]
    assert state(tree)["power_limit_w"] == 350.0


@pytest.mark.parametrize("watts", ["100", "700"])
def test_a_power_limit_outside_the_range_is_refused_with_exit_2(sim_host_tree, watts: str) -> None:
    tree = sim_host_tree()
    result = tree.run(["nvidia-smi", f"--power-limit={watts}"])
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        f"Provided power limit {float(watts):.2f} W is not a valid power limit which should be between "
        "150.00 W and 600.00 W for GPU 00000000:01:00.0", "Terminating early due to previous errors."]
    assert state(tree)["power_limit_w"] == 600.0


def test_persistence_and_application_clocks(sim_host_tree) -> None:
    tree = sim_host_tree()
    assert tree.run(["nvidia-smi", "-pm", "1"]).stdout.splitlines()[0] == "Enabled persistence mode for GPU 00000000:01:00.0."
    assert tree.run(["nvidia-smi", "-pm", "ENABLED"]).stdout.startswith("Persistence mode is already Enabled")
    ok = tree.run(["nvidia-smi", "-ac", "14001,2800"])
    assert ok.stdout.splitlines()[0] == 'Applications clocks set to "(MEM 14001, SM 2800)" for GPU 00000000:01:00.0'
    bad = tree.run(["nvidia-smi", "-ac", "9999,2800"])
    assert bad.returncode == 2 and "is not supported for GPU" in bad.stdout
    assert state(tree)["persistence"] is True and state(tree)["application_clocks"] == [14001, 2800]
    assert tree.run(["nvidia-smi", "-rac"]).returncode == 0 and state(tree)["application_clocks"] is None


@pytest.mark.parametrize("argv, rc, words", [
    (["-lgc", "2800,180"], 2, "Invalid combination of input arguments"),
    (["-lgc"], 2, "Invalid combination of input arguments"),
    (["--frobnicate"], 2, "Invalid combination of input arguments"),
    (["-pl", "300", "-pm", "1"], 2, "Invalid combination of input arguments"),
    (["-i", "3", "-pl", "300"], 6, "No devices were found"),
    (["--query-gpu=name,bogus", "--format=csv"], 2, 'Field "bogus" is not a valid field to query.'),
])
def test_bad_arguments_fail_like_the_real_tool(sim_host_tree, argv: list, rc: int, words: str) -> None:
    result = sim_host_tree().run(["nvidia-smi", *argv])
    assert result.returncode == rc and words in result.stdout


def test_settings_are_refused_to_an_unprivileged_user(sim_host_tree) -> None:
    tree = sim_host_tree()
    user = None if os.geteuid() != 0 else "65534"
    result = tree.run(["nvidia-smi", "-pl", "350"], user=user)
    assert result.returncode == 4
    assert result.stdout.splitlines() == [
        "Failed to set power management limit for GPU 00000000:01:00.0: Insufficient Permissions",
        "Terminating early due to previous errors."]
    assert tree.run(["nvidia-smi", "-L"], user=user).returncode == 0  # reading is allowed


def test_csv_queries_follow_format_options_and_aliases(sim_host_tree) -> None:
    tree = sim_host_tree()
    tree.run(["nvidia-smi", "-pl", "450"])
    with_header = tree.run(["nvidia-smi", "--query-gpu=name,power.limit,clocks.max.gr,memory.total", "--format=csv"])
    assert with_header.stdout.splitlines() == [
        "name, power.limit [W], clocks.max.graphics [MHz], memory.total [MiB]",
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition, 450.00 W, 3090 MHz, 97887 MiB"]
    bare = tree.run(["nvidia-smi", "--query-gpu=power.limit,pstate,vbios_version,driver_version",
                     "--format=csv,noheader,nounits"])
    assert bare.stdout.strip() == "450.00, P8, 98.02.81.00.07, 610.43.03"


def test_listing_query_and_summary_describe_the_card(sim_host_tree) -> None:
    tree = sim_host_tree()
    listing = tree.run(["nvidia-smi", "-L"]).stdout
    assert listing.startswith("GPU 0: NVIDIA RTX PRO 6000 Blackwell Workstation Edition (UUID: GPU-")
    query = tree.run(["nvidia-smi", "-q"]).stdout
    assert "VBIOS Version                         : 98.02.81.00.07" in query
    assert "Driver Version                            : 610.43.03" in query
    summary = tree.run(["nvidia-smi"]).stdout
    assert "CUDA Version: 13.3" in summary and "/ 97887MiB" in summary


def test_every_setter_call_is_counted_and_queries_are_not(sim_host_tree) -> None:
    from reprofleet.sim.rfsim import nvsmi

    tree = sim_host_tree()
    assert nvsmi.setter_calls(tree.hw) == []
    tree.run(["nvidia-smi", "-L"])
    tree.run(["nvidia-smi", "-q", "-d", "CLOCK"])
    assert nvsmi.setter_calls(tree.hw) == []  # reading changes nothing and is not a setter
    tree.run(["nvidia-smi", "-i", "0", "-lgc", "180,2800"])
    tree.run(["nvidia-smi", "-pl", "100"])  # refused (out of range): still asked, still counted
    tree.run(["nvidia-smi", "--reset-gpu-clocks"])
    calls = nvsmi.setter_calls(tree.hw)
    assert [(c["setter"], c["value"]) for c in calls] == [("lgc", "180,2800"), ("pl", "100"), ("rgc", "")]
    assert all(c["gpus"] == [0] for c in calls)
