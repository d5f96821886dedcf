"""One flag table for every task, through Invoke's own parser: an inventory is -i/--inventory
(and --hosts), a host pattern -l/--limit, the same letter means the same flag on every task,
no letter is handed out by first letter, and -h is help everywhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reprofleet.cli.flags import SHORT
from reprofleet.cli.tasks import ns
from tests.support.paths import REPO as ROOT


def contexts() -> dict[str, dict[str, tuple[str, ...]]]:
    """Task name -> its flags' names (long first), as the parser sees them."""
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for context in ns.to_contexts():
        out[context.name] = {arg.names[0]: tuple(arg.names) for arg in context.args.values()}
    return out


def test_every_short_letter_is_from_the_table_and_means_the_same_flag_everywhere() -> None:
    letters = {name: letter for name, letter in SHORT.items()}
    for task, flags in contexts().items():
        for long, names in flags.items():
            shorts = [n for n in names if len(n) == 1]
            assert "h" not in shorts, (task, long)
            assert shorts == ([letters[long]] if long in letters else []), (task, long, names)


def test_every_task_that_reads_an_inventory_takes_i_inventory_and_hosts() -> None:
    found = {task: flags["inventory"] for task, flags in contexts().items() if "inventory" in flags}
    assert {"campaign", "facts", "doctor", "policy", "power", "compare", "plan", "cache.pull", "cache.push"} <= set(found)
    assert all(names == ("inventory", "hosts", "i") for names in found.values())
    assert all("hosts" not in flags for task, flags in contexts().items() if task in ("sim.up", "demo"))  # a count


@pytest.mark.parametrize("task", ["campaign", "plan", "facts", "doctor", "report", "compare", "export", "status",
                                  "sim.up", "cache.push"])
def test_h_is_help_on_every_task(task: str) -> None:
    done = subprocess.run([sys.executable, "-m", "reprofleet", task, "-h"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.startswith(f"Usage: reprofleet [--core-opts] {task}"), done.stderr


def test_i_and_l_choose_the_inventory_and_the_hosts(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    ws01:\n      ansible_host: 10.213.254.254\n"
                         "    ws02:\n      ansible_host: 10.213.254.253\n")
    book = ROOT / "playbooks" / "demo.yml"
    done = subprocess.run([sys.executable, "-m", "reprofleet", "campaign", "-i", str(inventory), "-l", "ws02", "-p",
                           str(book), "-n"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "hosts (1): ws02" in done.stdout
