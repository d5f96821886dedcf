"""Boots and the simulated journalctl: the previous boot's kernel log, if the journal kept it."""

from __future__ import annotations

from reprofleet.sim.rfsim import boots


def two_boots(tree, xid: bool = True) -> tuple:
    first = boots.new_boot(tree.hw / "boots", "jr", now=1_800_000_000.0)
    if xid:
        boots.append_kmsg(tree.hw / "boots" / first.kmsg_name, boots.xid_message(79, 4242, "python3"),
                          level=boots.KERN_ERR, usec=95_000_000)
    boots.end_current(tree.hw / "boots", now=1_800_000_100.0)
    second = boots.new_boot(tree.hw / "boots", "jr", now=1_800_000_200.0)
    return first, second


def test_a_persistent_journal_shows_the_previous_boots_kernel_log(sim_host_tree, tmp_path) -> None:
    tree = sim_host_tree()
    first, second = two_boots(tree)
    journal = {"RFSIM_JOURNAL_DIR": str(tmp_path)}
    previous = tree.run(["journalctl", "-k", "-b", "-1", "-o", "short-iso", "--no-pager"], **journal)
    assert previous.returncode == 0
    lines = previous.stdout.splitlines()
    assert " jr kernel: Linux version " in lines[0]
    assert lines[-1].endswith("kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=4242, name=python3, GPU has fallen off the bus.")
    current = tree.run(["journalctl", "-k", "-b", "0", "-o", "cat"], **journal)
    assert "NVRM: Xid" not in current.stdout and "Linux version" in current.stdout
    listing = tree.run(["journalctl", "--list-boots", "--no-pager"], **journal).stdout.splitlines()
    assert [row.split()[:2] for row in listing[1:]] == [
        ["-1", first.boot_id.replace("-", "")], ["0", second.boot_id.replace("-", "")]]
    by_id = tree.run(["journalctl", "-k", f"--boot={first.boot_id}", "-o", "cat", "-n", "1"], **journal)
    assert by_id.stdout.startswith("NVRM: Xid")


def test_a_volatile_journal_has_no_previous_boot(sim_host_tree, tmp_path) -> None:
    tree = sim_host_tree()
    two_boots(tree)
    journal = {"RFSIM_JOURNAL_DIR": str(tmp_path / "absent")}
    previous = tree.run(["journalctl", "-k", "-b", "-1", "-o", "short-iso", "--no-pager"], **journal)
    assert previous.returncode == 1 and previous.stdout == ""
    assert previous.stderr == "Data from the specified boot (-1) is not available: No such boot ID in journal\n"
    assert len(tree.run(["journalctl", "--list-boots"], **journal).stdout.splitlines()) == 2


def test_kernel_log_records_use_the_dev_kmsg_format(sim_host_tree) -> None:
    tree = sim_host_tree()
    boot = boots.new_boot(tree.hw / "boots", "km")
    boots.append_kmsg(tree.hw / "boots" / boot.kmsg_name, "hello", level=boots.KERN_WARNING, usec=1234)
    records = boots.parse_kmsg((tree.hw / "boots" / boot.kmsg_name).read_text())
    assert records[-1] == {"level": 4, "seq": len(records) - 1, "usec": 1234, "message": "hello"}
    assert [r["seq"] for r in records] == list(range(len(records)))
    assert (tree.hw / "boots" / boot.boot_id_name).read_text().strip() == boot.boot_id


def test_journalctl_argument_forms() -> None:
    from reprofleet.sim.rfsim.journal import parse

    assert parse(["-b", "-k"]) == {"boot": "0", "kernel": ""}
    assert parse(["-k", "-b", "-1", "-o", "short-iso", "--no-pager"]) == {"kernel": "", "boot": "-1", "output": "short-iso"}
    assert parse(["--boot=abc", "-kf"]) == {"boot": "abc", "kernel": "", "follow": ""}
