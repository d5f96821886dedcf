"""Cache modes and content-addressed pushes on the simulated fleet (issue 12, item 2).

One fleet of two hosts for the module. The fake vLLM engine writes, with its own code, the
hash of the PoC file and of every file in the cache folder it found at start
(``hw/seen.jsonl``); these tests compare that with what the controller pushed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from reprofleet.runner import cache_sync
from reprofleet.remote.agent import AgentClient, load_bundle
from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_log_lines, read_records
from reprofleet.sim.spec import SimHostSpec
from reprofleet.remote.transport import TransportSettings, connect
from tests.support.fleet_campaign import POC, settings_for, write_playbook

pytestmark = pytest.mark.fleet

CELLS = ("  - name: seeded\n"
         "  - name: seeded-python\n    runtime: {kind: python, image: null, docker_args: null}\n"
         "  - name: seeded-venv\n    runtime: {kind: venv, vllm: '0.26.0', image: null, docker_args: null, "
         "find_links: /etc/reprofleet-sim/wheelhouse, no_index: true}\n"
         "  - name: fresh\n    cache: fresh\n"
         "  - name: persistent\n    cache: persistent\n")


def make_seed(folder: Path, salt: str) -> Path:
    """A small vLLM-like cache: compiled graphs, an autotune table, one larger blob."""
    (folder / "torch_compile_cache" / "a1b2" / "rank_0_0").mkdir(parents=True)
    (folder / "torch_compile_cache" / "a1b2" / "rank_0_0" / "graph.py").write_text(f"# graph {salt}\n")
    (folder / "flashinfer").mkdir()
    (folder / "flashinfer" / "autotune.json").write_text(json.dumps({"tile": 128, "salt": salt}))
    (folder / "modelinfos.bin").write_bytes(hashlib.sha256(salt.encode()).digest() * 40000)  # 1.28 MB
    return folder


def seen(host: Any) -> list[dict[str, Any]]:
    path = host.paths.hw / "seen.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def by_path(snap: cache_sync.Snapshot) -> dict[str, str]:
    return {f.path: f.sha256 for f in snap.files}


@pytest.fixture(scope="module")
def fleet(sim_ready: None) -> Iterator[Any]:
    from reprofleet.sim import Fleet

    up = Fleet.up((SimHostSpec("ca-a", script=("clean",) * 40, time_scale=0.02),  # records, not timing, are checked
                   SimHostSpec("ca-b", script=("clean",) * 40, time_scale=0.02)))
    try:
        yield up
    finally:
        up.down()


@pytest.fixture(scope="module")
def campaign(fleet: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every cache mode, docker, python and venv runtimes, two hosts, one attempt per cell."""
    tmp = tmp_path_factory.mktemp("cache-modes")
    book = write_playbook(tmp / "book", attempts=1, attempt_timeout=30, cells=CELLS, extra="order: sequential\n")
    make_seed(tmp / "book" / "seed", "first")
    book.write_text(book.read_text().replace("poc: {script:", "poc: {cache: seeded, cache_source: seed, script:"))
    before = {host.name: len(seen(host)) for host in fleet.hosts}
    plan = make_plan(load_playbook(book), load_inventory(fleet.inventory_path).hosts)
    result = run_campaign(plan, settings_for(fleet), tmp / "reports")
    records = sorted(read_records(result.directory.attempts), key=lambda r: (r["host"], r["started"]))
    return {"records": records, "events": read_log_lines(result.directory.events),
            "snapshot": cache_sync.build_snapshot(tmp / "book" / "seed"), "tmp": tmp,
            "seen": {host.name: seen(host)[before[host.name]:] for host in fleet.hosts}}


def client(fleet: Any, name: str) -> AgentClient:
    host = next(h for h in load_inventory(fleet.inventory_path).hosts if h.name == name)
    session = connect(host, TransportSettings(known_hosts=Path(fleet.known_hosts_path)))
    agent = AgentClient(session, load_bundle(), host.python)
    agent.push()
    return agent


def test_every_cache_mode_and_runtime_ran_and_each_record_names_its_snapshot(campaign: dict[str, Any]) -> None:
    records = campaign["records"]
    assert [(r["cell"], r["outcome"]) for r in records] == [
        (cell, "clean") for _ in ("ca-a", "ca-b")
        for cell in ("seeded", "seeded-python", "seeded-venv", "fresh", "persistent")]
    snapshot = campaign["snapshot"].snapshot
    for record in records:
        seeded = record["cell"].startswith("seeded")
        assert record["cache_snapshot"] == (snapshot if seeded else None)
        assert (record["cache"] is None) == (record["cell"] == "fresh")
    # a cell's own mode is part of its identity; the playbook's default is not (ids stay as they were)
    assert {r["cell"]: r["factors"].get("cache") for r in records} == {
        "seeded": None, "seeded-python": None, "seeded-venv": None, "fresh": "fresh", "persistent": "persistent"}


def test_each_host_received_exactly_the_pushed_poc_and_snapshot_bytes(campaign: dict[str, Any]) -> None:
    """The engine's own hashes at start: the PoC is the controller's; a seeded cache holds
    exactly the manifest (in docker, python and venv alike); fresh and persistent cells start from
    cache_source too (unpacked into their empty folder, as before seeded existed)."""
    poc_sha = hashlib.sha256(POC.read_bytes()).hexdigest()
    expected = by_path(campaign["snapshot"])
    for host, lines in campaign["seen"].items():
        assert len(lines) == 5, host
        assert {line["poc_sha256"] for line in lines} == {poc_sha}
        seeded, seeded_python, seeded_venv, fresh, persistent = lines
        assert seeded["cache_files"] == expected and seeded_python["cache_files"] == expected
        assert seeded_venv["cache_files"] == expected  # the venv runtime's engine saw the same bytes
        assert seeded["cache_dir"] == "/root/.cache/vllm" and "seeded-" in seeded_python["cache_dir"]
        assert "seeded-" in seeded_venv["cache_dir"] and seeded_venv["cache_dir"] != seeded_python["cache_dir"]
        assert fresh["cache_files"] == expected and persistent["cache_files"] == expected


def test_the_snapshot_travelled_once_per_host_and_an_unchanged_push_is_one_quick_question(
        fleet: Any, campaign: dict[str, Any]) -> None:
    pushed = [e for e in campaign["events"] if e["event"] == "cache_pushed"]
    snap = campaign["snapshot"]
    assert sorted(e["host"] for e in pushed) == ["ca-a", "ca-b"]
    assert all(e["objects"] == len(snap.objects()) and e["bytes"] == snap.object_bytes for e in pushed)
    assert {e["via"] for e in pushed} == {"ssh"}  # a campaign streams the objects through the ssh binary
    agent = client(fleet, "ca-a")
    try:
        again = cache_sync.push(agent, snap)
    finally:
        agent.session.close()
    assert again.already_there and again.sent_bytes == 0  # (its speed is bench/'s: a re-push under 1 s)


def test_an_interrupted_push_resumes_sending_only_what_is_missing(fleet: Any, tmp_path: Path) -> None:
    folder = make_seed(tmp_path / "second", "second")
    (folder / "weights-cache.bin").write_bytes(os.urandom(6 << 20))
    snap = cache_sync.build_snapshot(folder)
    agent = client(fleet, "ca-b")
    try:
        have = cache_sync.ask_have(agent, snap)
        channel = agent.session.exec_channel(cache_sync.agent_command(
            agent, ["cache", "receive", "--snapshot", snap.snapshot]))
        whole = b"".join(cache_sync.frames(snap, have["missing"], {}))
        channel.write(whole[: len(whole) // 2])  # the link dies half way
        status, _, _ = channel.finish(timeout=30)
        assert status != 0
        resumed = cache_sync.push(agent, snap)
        assert not resumed.already_there and 0 < resumed.sent_bytes < snap.object_bytes * 0.6
        built = cache_sync.materialize(agent, snap.snapshot, "/root/.cache/reprofleet/cache/resume-check")
        assert built["built"] and built["bytes"] == snap.total_bytes
        assert cache_sync.push(agent, snap).already_there
    finally:
        agent.session.close()


def test_a_corrupted_object_is_refused_on_the_host(fleet: Any, tmp_path: Path) -> None:
    snap = cache_sync.build_snapshot(make_seed(tmp_path / "third", "third"))
    agent = client(fleet, "ca-a")
    try:
        have = cache_sync.ask_have(agent, snap)
        body = bytearray(b"".join(cache_sync.frames(snap, have["missing"], {})))
        body[body.index(b'"tile"') + 2] ^= 0x01
        channel = agent.session.exec_channel(cache_sync.agent_command(
            agent, ["cache", "receive", "--snapshot", snap.snapshot]))
        channel.write(bytes(body))
        status, out, _ = channel.finish(timeout=30)
        answer = json.loads(out.decode().splitlines()[-1])
        autotune = next(f.sha256 for f in snap.files if f.path.endswith("autotune.json"))
        assert status == 1 and answer["refused"] == [autotune] and not answer["complete"]
        with pytest.raises(cache_sync.CacheError, match="not complete"):
            cache_sync.materialize(agent, snap.snapshot, "/root/.cache/reprofleet/cache/never-built")
        assert agent.session.run("test -e /root/.cache/reprofleet/cache/never-built").exit_code == 1
    finally:
        agent.session.close()


def reprofleet(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reprofleet", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def test_cache_pull_harvests_a_runtimes_persistent_cache_by_its_image(fleet: Any, campaign: dict[str, Any]) -> None:
    """The persistent cell ran under vllm/vllm-openai:v0.25.1 on ca-b, starting from the seed."""
    tmp = campaign["tmp"]
    done = reprofleet("cache.pull", "ca-b", "from-runtime", "--hosts", str(fleet.inventory_path),
                      "--runtime", "vllm/vllm-openai:v0.25.1", "--into", str(tmp / "snapshots"), cwd=tmp)
    assert done.returncode == 0, done.stderr
    pulled = cache_sync.build_snapshot(tmp / "snapshots" / "from-runtime")
    assert by_path(pulled) == by_path(campaign["snapshot"]) and pulled.snapshot[:16] in done.stdout


def test_a_pulled_cache_seeds_a_campaign(fleet: Any, campaign: dict[str, Any]) -> None:
    """A host's warm cache harvested as a snapshot (invoke cache.pull), pushed ahead
    (invoke cache.push), then every host's seeded attempt starts from exactly it."""
    tmp = campaign["tmp"]
    warm = "/root/.cache/reprofleet/cache/warm-example"
    agent = client(fleet, "ca-a")
    try:
        agent.session.run(f"mkdir -p {warm}/torch_compile_cache/ff00 && printf 'compiled' > "
                          f"{warm}/torch_compile_cache/ff00/graph.so && head -c 300000 /dev/urandom > {warm}/blob")
    finally:
        agent.session.close()
    inventory = str(fleet.inventory_path)
    done = reprofleet("cache.pull", "ca-a", "warm", "--hosts", inventory, "--path", warm, "--into",
                      str(tmp / "snapshots"), cwd=tmp)
    assert done.returncode == 0, done.stderr
    pulled = cache_sync.build_snapshot(tmp / "snapshots" / "warm")
    assert sorted(by_path(pulled)) == ["blob", "torch_compile_cache/ff00/graph.so"]
    assert (tmp / "snapshots" / "warm.manifest.json").read_bytes() == pulled.manifest_bytes()
    again = reprofleet("cache.pull", "ca-a", "warm", "--hosts", inventory, "--path", warm, "--into",
                       str(tmp / "snapshots"), cwd=tmp)
    assert again.returncode != 0 and "already exists" in again.stderr  # a snapshot is never overwritten
    book = write_playbook(tmp / "pulled-book", attempts=1, attempt_timeout=30, cells="  - name: seeded\n")
    shutil.copytree(tmp / "snapshots" / "warm", tmp / "pulled-book" / "warm")
    book.write_text(book.read_text().replace("poc: {script:", "poc: {cache: seeded, cache_source: warm, script:"))
    pushed = reprofleet("cache.push", str(tmp / "pulled-book" / "warm"), "--hosts", inventory, cwd=tmp)
    assert pushed.returncode == 0 and "ca-a: pushed" in pushed.stdout and "ca-b: pushed" in pushed.stdout, \
        pushed.stdout + pushed.stderr
    before = {host.name: len(seen(host)) for host in fleet.hosts}
    plan = make_plan(load_playbook(book), load_inventory(fleet.inventory_path).hosts)
    result = run_campaign(plan, settings_for(fleet), tmp / "pulled-reports")
    records = list(read_records(result.directory.attempts))
    assert [r["cache_snapshot"] for r in records] == [pulled.snapshot] * 2
    events = [e for e in read_log_lines(result.directory.events) if e["event"] == "cache_pushed"]
    assert [e["already_there"] for e in events] == [True, True]  # cache.push had put it there
    for host in fleet.hosts:
        assert [line["cache_files"] for line in seen(host)[before[host.name]:]] == [by_path(pulled)]


def test_the_persistent_cache_keeps_flashinfers_managed_autotune_store_between_attempts(
        fleet: Any, tmp_path: Path) -> None:
    """Issue 36 item 2 on a host: vLLM 0.33 keeps FlashInfer's managed autotune store outside
    VLLM_CACHE_ROOT by default; the runtime points it into the campaign's cache, so with ``cache:
    persistent`` the second attempt finds the first one's winners and says so (FlashInfer's
    "Config cache hit ... source=managed cache" per op, no tuning bar), its store under that cache."""
    cells = ("  - name: persistent-033\n    cache: persistent\n    runtime: {kind: venv, vllm: '0.33.0', image: null, "
             "docker_args: null, find_links: /etc/reprofleet-sim/wheelhouse, no_index: true}\n")
    book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=60, cells=cells)
    host = next(h for h in fleet.hosts if h.name == "ca-a")
    before = len(seen(host))
    hosts = [h for h in load_inventory(fleet.inventory_path).hosts if h.name == host.name]
    result = run_campaign(make_plan(load_playbook(book), hosts), settings_for(fleet), tmp_path / "reports")
    records = sorted(read_records(result.directory.attempts), key=lambda r: r["attempt_index"])
    assert [r["outcome"] for r in records] == ["clean", "clean"]
    first, second = (result.directory.stream_path(r["attempt"]).read_text() for r in records)
    cache_root = seen(host)[before + 1]["cache_dir"]  # the second start's VLLM_CACHE_ROOT, as the engine saw it
    assert "Using FlashInfer managed autotune cache (root=flashinfer default)" in first
    assert "[AutoTuner]: Tuning fp4_gemm" in first and "Config cache hit" not in first
    assert "[AutoTuner]: Tuning" not in second
    for op in ("fp4_gemm", "trtllm::fused_moe::gemm1", "trtllm::fused_moe::gemm2"):
        assert f"Config cache hit for {op} (runner=" in second, op
    attached = second.split("ManagedAutotuneCache(env_dir=", 1)[1].split(",", 1)[0].strip("'\\\"")
    assert attached.startswith(cache_root.rstrip("/") + "/flashinfer_autotune/v2/"), (attached, cache_root)
