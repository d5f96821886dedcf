"""``invoke doctor`` on Slurm nodes: the scheduler's items decided on the golden output of a real
Slurm 22.05 (tests/fixtures/slurm/)."""

from __future__ import annotations

from dataclasses import replace

from reprofleet.campaign.doctor import Diagnosis, Status, with_slurm
from reprofleet.campaign.doctor_slurm import SlurmEvidence, gather, slurm_checks
from reprofleet.model import Host, PowerPort
from reprofleet.scheduler import SlurmClient, reboot_support
from reprofleet.scheduler.client import parse_config
from tests.support.fake_slurm import GoldenReplay, golden

GPU01 = Host("gpu01", "10.0.0.11", vars={"slurm_node": "gpu01"})
GPU02 = Host("gpu02", "10.0.0.12", vars={"slurm_node": "gpu02"})
PLAIN = Host("ws09", "10.0.0.19")


def _asked(*steps: str, user: str = "root", uid: int = 0) -> SlurmEvidence:
    replay = GoldenReplay("ping", "config", "munge_ok", "sacctmgr_no_dbd", *steps)
    return gather(SlurmClient(replay), [GPU01, PLAIN], user=user, uid=uid)  # squeue was captured for gpu01


def _items(host: Host, evidence: SlurmEvidence) -> dict[str, tuple[Status, str]]:
    return {c.item: (c.status, c.found) for c in slurm_checks(host, evidence)}


def test_an_idle_node_and_a_root_controller_are_ready_and_the_prefix_is_named() -> None:
    items = _items(GPU01, _asked("sinfo_idle", "squeue_empty"))
    assert items["slurm"] == (Status.OK, "Slurmctld(primary) at vm is UP")
    assert items["munge"] == (Status.OK, "munge answers on /tmp/slurmlab/munge/munge.socket")
    assert items["slurm rights"][0] == Status.OK and "root" in items["slurm rights"][1]
    assert items["slurm node"] == (Status.OK, "gpu01 IDLE; the campaign drains it with reason prefix "
                                              "reprofleet:<campaign>")
    assert items["slurm jobs"] == (Status.OK, "none on gpu01")


def test_a_running_job_warns_and_someone_elses_drain_is_missing() -> None:
    evidence = _asked("sinfo_drained", "squeue_one_running")
    gpu01 = _items(GPU01, replace(evidence, nodes={**evidence.nodes, "gpu01": replace(evidence.nodes["gpu01"],
                                                                                     reason="", flags=frozenset())}))
    assert gpu01["slurm jobs"] == (Status.WARN, "1 on gpu01: job 2 of slurmtest (running)")
    gpu02 = _items(GPU02, evidence)
    assert gpu02["slurm node"][0] == Status.MISSING and "'fan noise, ticket 4411'" in gpu02["slurm node"][1]
    left = _items(GPU01, evidence)["slurm node"]  # drained with a reprofleet: reason by an earlier campaign
    assert left[0] == Status.WARN and "a campaign left it" in left[1]


def test_a_user_who_is_not_an_operator_is_told_how_to_become_one() -> None:
    evidence = replace(_asked("sinfo_idle", "squeue_empty"), user="slurmtest", uid=1001, admin_level=None)
    status, found = _items(GPU01, evidence)["slurm rights"]
    assert status == Status.MISSING and "no slurmdbd" in found and "Invalid user id" in found
    operator = replace(evidence, admin_level="Operator")
    assert _items(GPU01, operator)["slurm rights"] == (Status.OK, "slurmtest: AdminLevel Operator")


def test_a_stopped_slurmctld_is_one_missing_item() -> None:
    evidence = gather(SlurmClient(GoldenReplay("ping_controller_down")), [GPU01], user="root", uid=0)
    (only,) = slurm_checks(GPU01, evidence)
    assert only.item == "slurm" and only.status == Status.MISSING and "is DOWN" in only.found


def test_a_dead_munge_under_a_running_slurmctld_is_named_as_munge() -> None:
    evidence = gather(SlurmClient(GoldenReplay("ping_munge_down")), [GPU01], user="root", uid=0)
    (only,) = slurm_checks(GPU01, evidence)
    assert only.status == Status.MISSING and "munge does not answer" in only.found


def test_a_dead_munge_is_missing_and_hosts_that_are_no_slurm_nodes_get_no_slurm_items() -> None:
    evidence = replace(_asked("sinfo_idle", "squeue_empty"), munge=None, munge_error="munge: Error: socket")
    assert _items(GPU01, evidence)["munge"][0] == Status.MISSING
    assert slurm_checks(PLAIN, evidence) == []
    found = with_slurm([Diagnosis("gpu01", ()), Diagnosis("ws09", ())], [GPU01, PLAIN],
                       SlurmClient(GoldenReplay("ping", "config", "munge_ok", "sacctmgr_no_dbd", "sinfo_idle",
                                                "squeue_empty")))
    assert [len(d.checks) for d in found] == [6, 0]  # slurm, munge, rights, node, jobs, reboot


def test_the_doctor_says_whether_the_cluster_lets_a_node_be_rebooted_through_slurm() -> None:
    slurm_powered = replace(GPU01, pdu=PowerPort("slurm", "slurmctld"))
    plain = _asked("sinfo_idle", "squeue_empty")  # config.json: no reboot_from_controller, no RebootProgram
    status, found = _items(slurm_powered, plain)["slurm reboot"]
    assert status == Status.MISSING and "cannot reboot a hard-locked node" in found
    (check,) = [c for c in slurm_checks(slurm_powered, plain) if c.item == "slurm reboot"]
    assert check.fix.startswith("slurm.conf needs SlurmctldParameters=reboot_from_controller")
    assert _items(GPU01, plain)["slurm reboot"] == (Status.OK, "the cluster does not allow scontrol reboot from the "
                                                               "controller (this host's power goes through its own pdu)")
    # the same lab's config with the parameter and a RebootProgram (its munge socket differs: only the config changes)
    allowed = replace(plain, reboot=reboot_support(parse_config(golden("config_reboot_from_controller")["stdout"])))
    assert _items(slurm_powered, allowed)["slurm reboot"] == (
        Status.OK, "the cluster allows scontrol reboot from the controller (RebootProgram /tmp/slurmlab37/reboot.sh); "
                   "this host cycles through it")
