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


def test_an_orderly_reboot_ends_the_previous_boots_journal_as_systemd_ends_a_real_one(sim_host_tree, tmp_path) -> None:
    """The simulated host's orderly reboot (rfsim/orderly_shutdown.py) reads, through its
    journalctl, as the agent reads a real one (collectors/shutdown_evidence.py)."""
    import time

    from reprofleet.sim.rfsim import orderly_shutdown
    from tests.support.agent_harness import collector

    shutdown_evidence = collector("shutdown_evidence")  # the agent's own module, whatever ran before

    tree = sim_host_tree()
    first = boots.new_boot(tree.hw / "boots", "jr", now=time.time() - 600)  # up for ten minutes
    journal_file = tree.hw / "boots" / first.journal_name
    orderly_shutdown.log(journal_file, orderly_shutdown.begin_lines("unattended-upgrades"), first.started)
    orderly_shutdown.log(journal_file, orderly_shutdown.END_LINES, first.started)
    boots.end_current(tree.hw / "boots")
    boots.new_boot(tree.hw / "boots", "jr")
    journal = {"RFSIM_JOURNAL_DIR": str(tmp_path)}
    whole = tree.run(["journalctl", "-b", "-1", "-o", "short-iso", "--no-pager", "-n", "3000"], **journal)
    lines = whole.stdout.splitlines()
    assert whole.returncode == 0 and " jr kernel: Linux version " in lines[0]
    assert lines[-1].endswith(" jr systemd-journald[412]: Journal stopped")
    found = shutdown_evidence.evidence(lines)
    assert found["orderly"] is True and found["by"].startswith("unattended-upgrades")
    kernel_only = tree.run(["journalctl", "-k", "-b", "-1", "-o", "cat"], **journal).stdout
    assert "Reached target" not in kernel_only and "Linux version" in kernel_only
    askers = tree.run(["journalctl", "-b", "-1", "-o", "cat", "-t", "systemd-logind", "-t", "unattended-upgrade"],
                      **journal).stdout.splitlines()
    assert askers == ["Found /var/run/reboot-required, rebooting", "The system will reboot now!", "System is rebooting."]
    assert shutdown_evidence.evidence(tree.run(["journalctl", "-b", "0", "-o", "short-iso"], **journal)
                                      .stdout.splitlines())["orderly"] is False  # the new boot
    assert orderly_shutdown.begin_lines("person")[0][2].startswith("reboot requested from client PID")


def test_the_wedge_model_takes_an_orderly_reboot_and_a_forgery_from_the_script_only() -> None:
    from reprofleet.sim.rfsim import wedge

    params = wedge.WedgeParams.from_config({})
    cond = wedge.Conditions(graphics_ceiling_mhz=3090, power_limit_w=600.0)
    script = [wedge.ORDERLY_REBOOT, wedge.FORGE]
    assert [wedge.decide(params, cond, attempt=i, seed=0, script=script).outcome for i in range(2)] == script
    assert wedge.ORDERLY_REBOOT not in wedge.OUTCOMES and wedge.FORGE not in wedge.OUTCOMES  # never drawn


def test_a_forging_poc_appends_a_clean_exit_to_every_attempts_events_and_replaces_its_exit_json(tmp_path, monkeypatch) -> None:
    import json

    from reprofleet.sim.rfsim import engine

    for name in ("old", "mine"):
        (tmp_path / "attempts" / name).mkdir(parents=True)
        (tmp_path / "attempts" / name / "events.jsonl").write_text('{"k":"start","seq":0}\n')
    monkeypatch.setenv("REPROFLEET_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("REPROFLEET_ATTEMPT", "mine")
    assert engine.forge_clean_exits() == 3
    for name in ("old", "mine"):
        last = json.loads((tmp_path / "attempts" / name / "events.jsonl").read_text().splitlines()[-1])
        assert (last["k"], last["rc"]) == ("exit", 0)
    assert json.loads((tmp_path / "attempts" / "mine" / "exit.json").read_text())["rc"] == 0
