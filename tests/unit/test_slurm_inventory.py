"""``-i slurm:PARTITION`` (a feature, a node list) merged with an Ansible inventory, on the
golden ``sinfo --json`` of a real Slurm 22.05."""

from __future__ import annotations

import pytest

from reprofleet.cli.flags import joined_inventory
from reprofleet.errors import InventoryError
from reprofleet.inventory import load_inventory
from reprofleet.inventory.patterns import limited
from reprofleet.scheduler import SlurmClient
from tests.support.fake_slurm import SLURM, GoldenReplay

LAB = str(SLURM / "lab.yml")


def _load(source: str) -> object:
    return load_inventory(source, slurm=SlurmClient(GoldenReplay("sinfo_idle")))


def test_a_partitions_nodes_carry_gres_features_and_take_login_and_power_from_the_ansible_inventory() -> None:
    inventory = load_inventory(f"slurm:gpu + {LAB}", slurm=SlurmClient(GoldenReplay("sinfo_idle")))
    assert inventory.names == ("gpu01", "gpu02")  # ws09 is no Slurm node: left out
    gpu01, gpu02 = inventory.hosts
    assert (gpu01.address, gpu01.user, gpu01.pdu is not None) == ("10.0.0.11", "lab", True)
    assert (gpu02.address, gpu02.user, gpu02.pdu) == ("localhost", None, None)  # its NodeAddr, no power
    assert gpu01.vars["slurm_node"] == "gpu01" and gpu01.vars["slurm_gres"] == ["gpu:rtxpro6000:2"]
    assert gpu01.vars["slurm_gpus"] == 2 and gpu01.vars["slurm_features"] == ["blackwell", "ib"]
    assert gpu02.vars["slurm_partitions"] == ["gpu", "debug"]
    assert "racked" in gpu01.groups and {"gpu", "feature_ib", "feature_blackwell"} <= set(gpu01.groups)
    assert inventory.source == f"slurm:gpu + {LAB}"


@pytest.mark.parametrize(("pattern", "chosen"), [
    ("debug", ("gpu02",)), ("feature_ib", ("gpu01",)), ("gpu:!debug", ("gpu01",)), ("gpu0*", ("gpu01", "gpu02")),
])
def test_host_patterns_work_on_slurm_nodes_as_on_any_inventory(pattern: str, chosen: tuple[str, ...]) -> None:
    assert limited(_load("slurm:gpu"), pattern).names == chosen  # type: ignore[arg-type]


@pytest.mark.parametrize(("source", "chosen"), [
    ("slurm:debug", ("gpu02",)), ("slurm:feature=ib", ("gpu01",)), ("slurm:nodes=gpu[01-02]", ("gpu01", "gpu02")),
    ("slurm:nodes=gpu02,gpu07", ("gpu02",)),
])
def test_a_partition_a_feature_or_a_node_list_selects(source: str, chosen: tuple[str, ...]) -> None:
    assert _load(source).names == chosen  # type: ignore[attr-defined]


@pytest.mark.parametrize(("source", "words"), [
    ("slurm:", "name a partition"),
    ("slurm:cpu", "Slurm has no node in partition 'cpu'"),
    ("slurm:colour=red", "unknown selector 'colour'"),
    ("slurm:nodes=gpu[02-01]", "counts down"),
    (f"slurm:gpu + slurm:debug + {LAB}", "give one slurm: source"),
])
def test_a_wrong_slurm_source_is_one_line_naming_it(source: str, words: str) -> None:
    with pytest.raises(InventoryError) as raised:
        _load(source)
    assert words in str(raised.value) and "\n" not in str(raised.value)


def test_a_slurm_that_cannot_list_its_nodes_is_an_inventory_error() -> None:
    with pytest.raises(InventoryError, match="cannot list Slurm's nodes"):
        load_inventory("slurm:gpu", slurm=SlurmClient(GoldenReplay("sinfo_controller_down")))


def test_a_node_the_campaign_drained_is_the_same_inventory_to_a_resume() -> None:
    from reprofleet.campaign.resume import host_digests

    before = load_inventory(f"slurm:gpu + {LAB}", slurm=SlurmClient(GoldenReplay("sinfo_idle")))
    drained = load_inventory(f"slurm:gpu + {LAB}", slurm=SlurmClient(GoldenReplay("sinfo_drained")))
    assert host_digests(before.hosts) == host_digests(drained.hosts)


def test_inventory_given_twice_reaches_the_task_as_one_source() -> None:
    assert joined_inventory({"hosts": ["slurm:gpu", "inventory/lab.yml"]})["hosts"] == "slurm:gpu + inventory/lab.yml"
    assert joined_inventory({"hosts": []})["hosts"] == ""
    assert joined_inventory({"hosts": "x.yml"})["hosts"] == "x.yml"
