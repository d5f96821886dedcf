"""A CLI scripts can trust: every task that prints results takes -j/--json, stdout then carries
only JSON in the shape its published schema (docs/schema/<task>.schema.json) says, and the
exit status is the same as without --json; the README's exit-status table, each task's help
and cli/exits.py say the same thing.

Every task runs through Invoke's real parser (``Program.run``) on fixture inputs: the
synthetic campaign folders, an inventory whose host refuses at once (127.0.0.1 port 9), and
the seams the other CLI tests use where a task would switch power or need a fleet.
"""

from __future__ import annotations

import inspect
import json
import re
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest
from invoke import Collection, Task
from jsonschema import Draft202012Validator

from tests.support.cli_inprocess import run_task
from tests.support import synthetic_campaign as synthetic
from reprofleet.cli.exits import TASK_EXITS, ExitStatus, exit_lines, exit_table_markdown
from reprofleet.cli.tasks import ns
from tests.support.paths import REPO

SCHEMAS = REPO / "docs" / "schema"
DEMO_BOOK = REPO / "playbooks" / "demo.yml"
# Where a task says one thing per host: JSON lines. Every other task: one document.
JSON_LINES = {"facts", "doctor", "policy", "cache.push", "sim.status"}


def _tasks(collection: Collection = ns, prefix: str = "") -> Iterator[tuple[str, Task]]:
    for name, task in collection.tasks.items():
        yield prefix + name, task
    for sub_name, sub in collection.collections.items():
        yield from _tasks(sub, f"{prefix}{sub_name}.")


def _flag_names(task: Task) -> set[str]:
    return {name for argument in task.get_arguments() for name in argument.names}


JSON_TASKS = sorted(name for name, task in _tasks() if "json" in _flag_names(task))


run = run_task  # the in-process front door (tests/support/cli_inprocess.py)


def schema(task: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SCHEMAS / f"{task}.schema.json").read_text())
    return loaded


def valid(task: str, out: str) -> list[dict[str, Any]]:
    """stdout parsed (each line with JSON lines, else the whole as one document) and checked
    against the task's schema; the documents, for the test's own assertions."""
    documents = [json.loads(line) for line in out.splitlines()] if task in JSON_LINES else [json.loads(out)]
    validator = Draft202012Validator(schema(task))
    for document in documents:
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]
        assert not errors, f"{task}: {errors[:5]}"
    return documents


def _refusing_inventory(tmp_path: Path) -> Path:
    """One host that refuses at once: every task that asks it fails fast, as data."""
    path = tmp_path / "hosts.yml"
    path.write_text("all:\n  hosts:\n    gone:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n")
    return path


def _campaign(tmp_path: Path, name: str = "synthetic-1") -> Path:
    return synthetic.write(tmp_path / name, synthetic.build(synthetic.Spec()))


# -- the schemas themselves -------------------------------------------------------------------

def _described(node: Any, where: str) -> Iterator[str]:
    """Every property of every object in a schema, where it lacks a description."""
    if isinstance(node, dict):
        for name, sub in (node.get("properties") or {}).items():
            if isinstance(sub, dict) and "description" not in sub:
                yield f"{where}.{name}"
        for key, sub in node.items():
            yield from _described(sub, f"{where}.{key}")
    elif isinstance(node, list):
        for index, sub in enumerate(node):
            yield from _described(sub, f"{where}[{index}]")


def test_every_schema_is_draft_2020_12_names_its_file_and_describes_every_field() -> None:
    files = sorted(SCHEMAS.rglob("*.schema.json"))  # the tasks' shapes, and records/ (what the files hold)
    assert files
    for path in files:
        loaded = json.loads(path.read_text())
        Draft202012Validator.check_schema(loaded)
        assert loaded["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert loaded["$id"]== "urn:reprofleet:schema:" + path.relative_to(SCHEMAS).as_posix(), path
        assert loaded.get("description"), path
        assert not list(_described(loaded, path.name))


def test_the_schema_files_are_what_docs_schema_generate_py_writes() -> None:
    import runpy

    written = runpy.run_path(str(SCHEMAS / "generate.py"))["WRITTEN"]
    assert {p.relative_to(SCHEMAS).as_posix() for p in SCHEMAS.rglob("*.schema.json")} == set(written)
    for name, text in written.items():
        assert (SCHEMAS / name).read_text() == text, f"{name}: run python docs/schema/generate.py"


def test_every_task_with_a_json_flag_has_a_schema_and_every_schema_is_a_tasks() -> None:
    assert {"campaign", "plan", "compare", "power", "policy", "cache.push", "cache.pull", "export", "sim.status",
            "facts", "doctor", "report", "status"} <= set(JSON_TASKS)
    assert {p.name.removesuffix(".schema.json") for p in SCHEMAS.glob("*.schema.json")} == set(JSON_TASKS)


def test_json_is_j_on_every_task_that_has_it() -> None:
    for name, task in _tasks():
        if name in JSON_TASKS:
            assert "j" in _flag_names(task), name


def test_the_verdict_definitions_are_the_same_in_every_schema_that_carries_verdicts() -> None:
    shared = ("interval", "comparison", "split", "verdict", "judging", "judgement")
    carrying = [t for t in JSON_TASKS if "verdict" in (schema(t).get("$defs") or {})]
    assert set(carrying) == {"campaign", "compare", "demo", "report", "status"}
    first = {k: schema(carrying[0])["$defs"][k] for k in shared}
    for task in carrying[1:]:
        assert {k: schema(task)["$defs"][k] for k in shared} == first, task


# -- exit statuses: one table, the README and each task's help ---------------------------------

def test_every_task_says_its_exit_statuses_and_the_readme_table_is_the_same_table() -> None:
    names = {name for name, _ in _tasks()}
    assert names == set(TASK_EXITS)
    for name, task in _tasks():
        doc = inspect.getdoc(task) or ""
        assert doc.endswith("\n".join(exit_lines(name))), name
    readme = (REPO / "README.md").read_text()
    block = re.search(r"<!-- exit-status:begin[^>]*-->\n(.*?)\n<!-- exit-status:end -->", readme, re.S)
    assert block is not None and block.group(1) == exit_table_markdown()


def test_every_exit_status_a_task_names_is_one_of_exit_status() -> None:
    for statuses in TASK_EXITS.values():
        assert set(statuses) <= set(ExitStatus)


# -- each task with --json, against its schema ------------------------------------------------

def test_report_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "report", str(_campaign(tmp_path)), "-j")
    (document,) = valid("report", out)
    assert code == 0 and {v["cell"] for v in document["verdicts"]} == {"default", "lgc-2800", "pl-350"}


def test_compare_json_by_path_and_by_host_and_its_html_line_goes_to_stderr(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _campaign(tmp_path / "a"), _campaign(tmp_path / "b")
    code, out, err = run(capsys, "compare", str(a), str(b), "--json", "--html", str(tmp_path / "c.html"))
    (document,) = valid("compare", out)
    assert code == 0 and len(document["sides"]) == 2 and document["by"] == "path"
    assert "html:" in err and (tmp_path / "c.html").exists()
    code, out, _ = run(capsys, "compare", str(a), "--by", "host", "-j")
    (document,) = valid("compare", out)
    assert code == 0 and {s["label"] for s in document["sides"]} == {"host ws2", "host ws10"} and document["pooled"]


def test_status_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "status", str(_campaign(tmp_path)), "-j")
    (document,) = valid("status", out)
    assert code == 0 and document["campaign"] == "synthetic-1"


def test_export_json_says_what_it_wrote_and_needs_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _campaign(tmp_path)
    code, out, err = run(capsys, "export", str(folder), "--format", "jsonl", "--out", str(tmp_path / "a.jsonl"), "-j")
    (document,) = valid("export", out)
    rows = (tmp_path / "a.jsonl").read_text().splitlines()
    assert code == 0 and document["attempts"] == len(rows) > 0 and document["format"] == "jsonl"
    code, out, err = run(capsys, "export", str(folder), "-j")  # stdout would carry the rows too
    assert code == 2 and out == "" and "--out" in err


def test_the_committed_real_gpu_campaign_validates_for_report_status_compare_and_export(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (real,) = (REPO / "tests" / "fixtures" / "real_gpu" / "campaign").iterdir()
    for argv in (["report", str(real)], ["status", str(real)], ["compare", str(real), str(_campaign(tmp_path))],
                 ["export", str(real), "--out", str(tmp_path / "real.csv")]):
        code, out, _ = run(capsys, *argv, "-j")
        assert code == 0, argv
        valid(argv[0], out)


def test_plan_json_in_both_modes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "--baseline", "0.3", "-j")
    (document,) = valid("plan", out)
    assert code == 0 and document["mode"] == "baseline" and document["clean_attempts"] == 9
    code, out, _ = run(capsys, "plan", "-i", str(_refusing_inventory(tmp_path)), "-p", str(DEMO_BOOK),
                       "--campaigns", "2", "--json")
    (document,) = valid("plan", out)
    assert code == 0 and document["mode"] == "campaign" and document["estimate"]["hosts"] == ["gone"]
    assert document["verdicts"]["fixed"]["campaigns"] == 2
    code, out, _ = run(capsys, "plan", "--baseline", "2", "-j")
    assert code == 2 and out == ""


def test_plan_json_of_a_search_and_a_bisection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "-p", str(REPO / "playbooks" / "search-clock.yml"), "--truth", "onset=2700",
                       "--campaigns", "4", "-j")
    (document,) = valid("plan", out)
    assert code == 0 and document["mode"] == "search" and document["runs"] == 4
    (truth,) = document["truths"]
    assert [d["design"] for d in truth["designs"]] == ["ours", "grid", "fixed"] and len(truth["p"]) == 5
    book = tmp_path / "bisect.yml"
    (tmp_path / "poc").mkdir()  # beside the playbook: a PoC outside its folder is refused
    shutil.copy(REPO / "playbooks" / "poc" / "sm120_hostwedge.py", tmp_path / "poc" / "sm120_hostwedge.py")
    book.write_text((REPO / "playbooks" / "search-clock.yml").read_text().split("search:")[0]
                    + "bisect:\n  factor: vars.vllm\n  versions: ['0.24.0', '0.25.1', '0.26.0', '0.27.0']\n"
                      "  known: {bad: first}\n  budget: {attempts: 200}\n")
    code, out, _ = run(capsys, "plan", "-p", str(book), "--truth", "change=0.26.0,bad=0.4,good=0", "--campaigns", "4",
                       "-j")
    (document,) = valid("plan", out)
    assert code == 0 and document["mode"] == "bisect"
    assert [d["design"] for d in document["truths"][0]["designs"]] == ["ours", "fixed"]


def test_campaign_dry_run_json_names_the_hosts_chosen_and_check_hosts_fails_as_without_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    inventory = tmp_path / "lab.yml"
    inventory.write_text("all:\n  hosts:\n    ws01:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n"
                         "    ws02:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n")
    code, out, _ = run(capsys, "campaign", "-i", str(inventory), "-p", str(DEMO_BOOK), "-n", "-j", "-l", "ws02")
    (document,) = valid("campaign", out)
    assert code == 0 and document["chosen"]["chosen"] == ["ws02"] and document["chosen"]["of"] == 2
    assert document["plan"]["planned"] == {"ws02": 12} and document["readiness"] is None
    code, out, _ = run(capsys, "campaign", "-i", str(inventory), "-p", str(DEMO_BOOK), "-n", "--check-hosts", "-j")
    (document,) = valid("campaign", out)
    assert code == 3 == document["exit_status"] and document["readiness"]["ready"] is False
    assert not (tmp_path / "reports").exists()


def test_campaign_json_at_the_end_carries_the_verdicts_and_exits_3_for_a_quarantined_host(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The run itself is the seam (the fleet tests run it for real): what --json adds is what
    is printed around it, and that the summary tables leave stdout to the JSON."""
    from reprofleet.campaign import run as campaign_mod
    from reprofleet.cli import campaign_tasks as tasks
    from reprofleet.records.store import CampaignDir, read_records

    monkeypatch.chdir(tmp_path)
    folder = _campaign(tmp_path / "reports")
    records = tuple(read_records(folder / "attempts.jsonl"))

    def ran(plan: Any, settings: Any, root: Path, **_: Any) -> campaign_mod.CampaignResult:
        return campaign_mod.CampaignResult(folder.name, CampaignDir(folder), records, False,
                                           quarantined={"ws10": "could not be recovered"})

    monkeypatch.setattr(campaign_mod, "run_campaign", ran)
    monkeypatch.setattr(tasks, "_install_stop_handlers", lambda stop: None)
    code, out, err = run(capsys, "campaign", "-i", str(_refusing_inventory(tmp_path)), "-p", str(DEMO_BOOK), "-j")
    (document,) = valid("campaign", out)
    assert code == 3 == document["exit_status"]
    assert document["result"]["quarantined"] == {"ws10": "could not be recovered"}
    assert {v["cell"] for v in document["judgement"]["verdicts"]} == {"default", "lgc-2800", "pl-350"}
    assert "ws10: quarantined" in err and "report:" in err  # the text went to stderr


def test_demo_json_is_the_campaigns_shape_after_a_campaign(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from reprofleet.campaign import run as campaign_mod
    from reprofleet.cli import campaign_tasks as tasks
    from reprofleet.records.store import CampaignDir
    from reprofleet.sim import simctl

    monkeypatch.chdir(tmp_path)
    folder = _campaign(tmp_path / "reports")
    inventory = _refusing_inventory(tmp_path)
    downs: list[Path] = []
    monkeypatch.setattr(simctl, "up", lambda count, config, sim_dir: SimpleNamespace(hosts=[], inventory_path=inventory))
    monkeypatch.setattr(simctl, "down", downs.append)
    monkeypatch.setattr(campaign_mod, "run_campaign", lambda plan, settings, root, **_: campaign_mod.CampaignResult(
        folder.name, CampaignDir(folder), (), False))
    monkeypatch.setattr(tasks, "_install_stop_handlers", lambda stop: None)
    code, out, _ = run(capsys, "demo", "-p", str(DEMO_BOOK), "-j")
    (document,) = valid("demo", out)
    assert code == 0 == document["exit_status"] and document["judgement"]["verdicts"] and len(downs) == 1


def test_facts_doctor_and_policy_json_fail_per_host_with_the_same_status_as_without(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    inventory = str(_refusing_inventory(tmp_path))
    for argv in (["facts", "-i", inventory], ["doctor", "-i", inventory, "-p", str(DEMO_BOOK)],
                 ["policy", "-i", inventory], ["policy", "-i", inventory, "--restore"]):
        code, out, _ = run(capsys, *argv, "-j")
        (line,) = valid(argv[0], out)
        assert code == 3 and line["host"] == "gone", argv
        assert run(capsys, *argv)[0] == 3, argv  # the same without --json
    assert line["action"] == "restore" and line["ok"] is False and line["error"]
    code, out, _ = run(capsys, "facts", "-i", inventory, "--bug-report", "-j")
    (line,) = valid("facts", out)
    assert code == 3 and line["host"] == "gone" and line["status"] == "failed" and line["path"] is None


def test_cache_push_and_pull_json(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from reprofleet.campaign import cache_ops
    from reprofleet.runner import cache_sync

    monkeypatch.chdir(tmp_path)
    snapshot = tmp_path / "snap"
    snapshot.mkdir()
    (snapshot / "kernel.bin").write_bytes(b"cubin")
    code, out, _ = run(capsys, "cache.push", str(snapshot), "-i", str(_refusing_inventory(tmp_path)), "-j")
    (line,) = valid("cache.push", out)
    assert code == 3 and line == {"host": "gone", "ok": False, "error": line["error"]}
    built = cache_sync.build_snapshot(str(snapshot))
    monkeypatch.setattr(cache_ops, "pull_from", lambda inventory, settings, host, name, remote, into: cache_ops.Pulled(
        host, remote, built, into / f"{name}.manifest.json"))
    code, out, _ = run(capsys, "cache.pull", "gone", "warm", "-i", "inv.yml", "--path", "cache", "-j")
    (document,) = valid("cache.pull", out)
    assert code == 0 and document["files"] == 1 and document["snapshot"] == built.snapshot


def test_power_json_for_an_action_and_for_verify_and_verify_not_confirmed_exits_3(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import reprofleet.campaign.power_ops as power_ops
    from reprofleet.power import PowerState

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(power_ops, "power_action", lambda hosts, host, action, root, dwell: PowerState.OFF)
    monkeypatch.setattr(power_ops, "live_lease", lambda hosts, host, transport: (None, None))
    code, out, _ = run(capsys, "power", "ws2", "off", "-i", "inv.yml", "-y", "-j")
    (document,) = valid("power", out)
    assert code == 0 and document == {"host": "ws2", "action": "off", "state": "off", "ok": True}
    miswired = power_ops.WiringReport("ws2", 1.5, 40.0, ("ws3",), ())
    monkeypatch.setattr(power_ops, "verify_wiring", lambda hosts, host, root: miswired)
    code, out, _ = run(capsys, "power", "ws2", "verify", "-i", "inv.yml", "-y", "-j")
    (document,) = valid("power", out)
    assert code == 3 and document["ok"] is False and document["others_silent"] == ["ws3"]
    code, out, err = run(capsys, "power", "ws2", "cycle", "-i", "inv.yml", "-j")  # no terminal, no --yes
    assert code == 2 and out == "" and "--yes" in err


def test_sim_status_json(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from reprofleet.sim import simctl

    row = {"name": "sim1", "address": "10.77.0.2", "power": "on", "frozen": False, "stalled": False,
           "boot_id": "b1", "sshd_pid": 4242, "gpu_policy": {"power_limit_w": 600.0}, "susceptible": True,
           "p_wedge": 0.4}
    monkeypatch.setattr(simctl, "status", lambda sim_dir: [row, {**row, "name": "sim2", "frozen": True}])
    code, out, _ = run(capsys, "sim.status", "-j")
    assert code == 0 and [line["name"] for line in valid("sim.status", out)] == ["sim1", "sim2"]
