"""`policy apply|read|restore` against a FAKE nvidia-smi and a FAKE pynvml (unit tests of
the agent's policy logic; the simulated fleet has fakes of its own)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from tests.support import agent_harness as h

policy_plan = h.collector("policy_plan")
agent_protocol = h.collector("agent_protocol")


class FakeCard:
    """One fake GPU's state file, the nvidia-smi call log, and the agent run against them."""

    def __init__(self, root: Path, **overrides: Any) -> None:
        self.root = root
        self.state = h.fake_gpu_state(root / "gpu.json", **overrides)
        self.smi_log = root / "smi.jsonl"

    def policy(self, *args: str) -> Tuple[int, Dict[str, Any]]:
        env = h.agent_env({"FAKE_PYNVML_STATE": str(self.state), "FAKE_NVIDIA_SMI_LOG": str(self.smi_log)},
                          fakes=True)
        rc, lines, _ = h.run_agent(self.root / "state", "policy", *args, env=env)
        assert len(lines) == 1
        return rc, lines[0]

    def smi_calls(self) -> List[List[str]]:
        if not self.smi_log.exists():
            return []
        return [json.loads(line)[2:] for line in self.smi_log.read_text().splitlines()]

    def baseline(self) -> Path:
        return self.root / "state" / "policy" / "gpu0.baseline.json"


@pytest.fixture
def card(tmp_path: Path) -> FakeCard:
    return FakeCard(tmp_path)


def test_apply_sets_every_setting_in_order_and_reads_back_what_the_card_holds(card: FakeCard) -> None:
    rc, report = card.policy("apply", "--gpu", "0", "--json",
                             '{"graphics_clocks": [180, 2800], "power_limit_w": 350, "persistence": true}')
    assert rc == 0 and report["ok"] is True and report["errors"] == []
    assert card.smi_calls() == [["-pm", "1"], ["-pl", "350"], ["-lgc", "180,2800"], ["-rmc"], ["-rac"]]
    assert [c["rc"] for c in report["commands"]] == [0] * 5
    assert report["commands"][0]["argv"][1:] == ["-i", "0", "-pm", "1"]  # root: no sudo
    back = report["readback"]
    assert back["graphics_clocks"] == [180, 2800] and back["power_limit_w"] == 350.0
    assert back["persistence"] is True and back["enforced_power_limit_w"] == 350.0
    assert back["default_power_limit_w"] == 600.0 and back["power_limit_range_w"] == [150.0, 600.0]
    assert back["memory_clocks"] == [405, 14001] and back["application_clocks"] == [14001, 2617]
    assert back["max_clocks_mhz"] == {"graphics": 3090, "memory": 14001}
    assert json.loads(card.baseline().read_text())["persistence"] is False


def test_a_later_apply_resets_what_it_omits_to_the_card_default(card: FakeCard) -> None:
    card.policy("apply", "--json", '{"graphics_clocks": [180, 2800], "persistence": true, '
                                   '"application_clocks": [14001, 2400]}')
    rc, report = card.policy("apply", "--json", "{}")
    assert rc == 0 and report["ok"]
    assert card.smi_calls()[-5:] == [["-pm", "0"], ["-pl", "600"], ["-rgc"], ["-rmc"], ["-rac"]]
    back = report["readback"]
    assert back["graphics_clocks"] == [180, 3090] and back["persistence"] is False
    assert back["application_clocks"] == [14001, 2617]


def test_restore_puts_defaults_back_and_persistence_to_its_baseline(card: FakeCard) -> None:
    card.policy("apply", "--json", '{"power_limit_w": 450, "persistence": true}')
    rc, report = card.policy("restore", "--gpu", "0")
    assert rc == 0 and report["ok"] and report["action"] == "restore"
    assert card.smi_calls()[-5:] == [["-pm", "0"], ["-pl", "600"], ["-rgc"], ["-rmc"], ["-rac"]]
    assert report["readback"]["power_limit_w"] == 600.0 and report["readback"]["persistence"] is False
    assert not card.baseline().exists()


def test_restore_puts_back_the_power_limit_the_owner_had_not_the_cards_default(tmp_path: Path) -> None:
    card = FakeCard(tmp_path)
    state = json.loads(card.state.read_text())
    state["gpus"][0].update(limit=450000, enforcedLimit=450000)  # the owner runs this card at 450 W
    card.state.write_text(json.dumps(state))
    card.policy("apply", "--json", '{"power_limit_w": 350}')
    rc, report = card.policy("restore")
    assert rc == 0 and report["ok"]
    assert card.smi_calls()[-4] == ["-pl", "450"] and report["readback"]["power_limit_w"] == 450.0
    assert any("owner's 450 W" in note for note in report["notes"])


def test_restore_without_a_baseline_leaves_persistence_alone(card: FakeCard) -> None:
    rc, report = card.policy("restore")
    assert rc == 0 and ["-pm", "0"] not in card.smi_calls() and ["-pm", "1"] not in card.smi_calls()
    assert any("no baseline" in note for note in report["notes"])


def test_a_power_limit_outside_nvml_constraints_fails_before_nvidia_smi_runs(card: FakeCard) -> None:
    rc, report = card.policy("apply", "--json", '{"power_limit_w": 700, "graphics_clocks": [180, 2800]}')
    assert rc == 1 and report["ok"] is False
    assert report["errors"] == ["power limit 700 W is outside this card's range 150-600 W (NVML constraints)"]
    assert card.smi_calls() == [] and report["commands"] == []


def test_read_reports_the_card_without_changing_it(card: FakeCard) -> None:
    rc, report = card.policy("read", "--gpu", "0")
    assert rc == 0 and report["action"] == "read" and report["commands"] == [] and card.smi_calls() == []
    assert report["readback"]["graphics_clocks"] == [180, 3090]


def test_a_lock_is_read_back_twice_through_the_p0_range_and_the_drivers_clock_range(card: FakeCard) -> None:
    rc, report = card.policy("read", "--gpu", "0")
    back = report["readback"]
    assert back["graphics_clocks"] == back["graphics_clocks_freqs"] == [180, 3090]  # no lock
    assert back["memory_clocks_freqs"] == [405, 14001] and back["clocks_event_reasons"] == 1
    rc, report = card.policy("apply", "--json", '{"graphics_clocks": [180, 2800]}')
    assert report["readback"]["graphics_clocks"] == report["readback"]["graphics_clocks_freqs"] == [180, 2800]


def test_a_driver_clock_string_that_cannot_be_read_is_null_with_a_note(tmp_path: Path) -> None:
    card = FakeCard(tmp_path, unsupported=["nvmlDeviceGetCurrentClockFreqs"])
    rc, report = card.policy("read")
    assert report["readback"]["graphics_clocks_freqs"] is None and report["readback"]["graphics_clocks"]
    assert any(note.startswith("clock_freqs: Not Supported") for note in report["notes"])


def test_the_drivers_clock_string_is_parsed_as_the_h200_wrote_it() -> None:
    gpu_policy = h.collector("gpu_policy")
    h200 = ("nvclock=345, nvclockmin=345, nvclockmax=1980, nvclockeditable=0, memclock=3201, memclockmin=3201, "
            "memclockmax=3201, memclockeditable=0, memTransferRate=6402, memTransferRatemin=6402")
    freqs = gpu_policy.clock_freqs(h200)
    assert (freqs["nvclockmin"], freqs["nvclockmax"], freqs["memclockmax"]) == (345, 1980, 3201)
    assert gpu_policy.clock_freqs(None) == {} and gpu_policy.clock_freqs("garbage, x=") == {}


def test_an_unsupported_reset_is_a_note_but_an_unsupported_request_fails(tmp_path: Path) -> None:
    card = FakeCard(tmp_path, smi_unsupported=["-rmc", "-lmc"])
    rc, report = card.policy("apply", "--json", '{"graphics_clocks": [180, 2800]}')
    assert rc == 0 and report["ok"] and any("-rmc" in note and "not supported" in note for note in report["notes"])
    rc, report = card.policy("apply", "--json", '{"memory_clocks": [405, 7000]}')
    assert rc == 1 and not report["ok"] and "-lmc 405,7000 (memory_clocks) failed (rc 3)" in report["errors"][0]


def test_a_failing_nvidia_smi_call_fails_the_apply_with_its_output(tmp_path: Path) -> None:
    card = FakeCard(tmp_path, smi_fail=["-lgc"])
    rc, report = card.policy("apply", "--json", '{"graphics_clocks": [180, 2800]}')
    assert rc == 1 and report["errors"] == ["-lgc 180,2800 (graphics_clocks) failed (rc 4): Insufficient Permissions"]


def test_an_unreadable_nvml_field_is_null_with_a_note(tmp_path: Path) -> None:
    card = FakeCard(tmp_path, unsupported=["nvmlDeviceGetApplicationsClock"])
    rc, report = card.policy("read")
    assert report["readback"]["application_clocks"] is None
    assert any(note.startswith("application_clocks.memory: Not Supported") for note in report["notes"])


def test_without_nvml_or_nvidia_smi_apply_fails_and_says_why(tmp_path: Path) -> None:
    rc, lines, _ = h.run_agent(tmp_path, "policy", "apply", "--json", '{"persistence": true}',
                               env=h.agent_env({"PATH": "/nonexistent"}))
    report = lines[0]
    assert rc == 1 and report["errors"] == ["nvidia-smi not found on PATH"]
    assert report["notes"][0].startswith("NVML unavailable")


@pytest.mark.parametrize("text", ['{"graphics_clock": [1, 2]}', '{"graphics_clocks": [2800, 180]}',
                                  '{"power_limit_w": true}', '{"persistence": "yes"}', "[1]", "not json",
                                  '{"application_clocks": [1]}'])
def test_bad_policies_are_usage_errors(tmp_path: Path, text: str) -> None:
    rc, lines, _ = h.run_agent(tmp_path, "policy", "apply", "--json", text)
    assert rc == 2 and lines[0]["k"] == "error"
    with pytest.raises(agent_protocol.UsageError):
        policy_plan.parse_policy(text)


def test_the_plan_resets_omitted_keys_and_keeps_the_baseline_persistence() -> None:
    policy = policy_plan.parse_policy('{"graphics_clocks": [180, 2800], "power_limit_w": 350.5}')
    steps = policy_plan.plan_apply(policy, default_limit_w=600.0, baseline_persistence=True)
    assert [(tuple(s.args), s.requested) for s in steps] == [
        (("-pm", "1"), False), (("-pl", "350.5"), True), (("-lgc", "180,2800"), True),
        (("-rmc",), False), (("-rac",), False)]


def test_without_root_every_call_goes_through_sudo_n() -> None:
    step = policy_plan.Step(("-rgc",), "graphics_clocks", False)
    assert policy_plan.command_argv("/usr/bin/nvidia-smi", 1, step, is_root=False) == [
        "sudo", "-n", "/usr/bin/nvidia-smi", "-i", "1", "-rgc"]


def test_power_limit_range_check() -> None:
    assert policy_plan.power_limit_problem(350, 150, 600) is None
    assert policy_plan.power_limit_problem(100, None, None) is None  # unknown: nvidia-smi decides
    assert "outside" in policy_plan.power_limit_problem(100, 150, 600)
