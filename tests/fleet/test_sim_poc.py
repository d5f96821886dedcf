"""The PoC on simulated hosts, started the seed's way (docker run over SSH), ends the way the
wedge model says: clean, error, a wedged host, a host that resets itself."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from reprofleet.sim import SimHostSpec
from tests.support.paths import REPO

pytestmark = pytest.mark.fleet

REAL_POC = REPO / "playbooks" / "poc" / "sm120_hostwedge.py"
STAND_IN = (
    "from vllm import LLM\n"
    "LLM(model='/tmp/sm120-wedge-poc/target', spec_method='dflash', spec_model='/tmp/sm120-wedge-poc/drafter',\n"
    "    spec_tokens=9, max_num_batched_tokens=8192, max_num_seqs=32, max_model_len=262144,\n"
    "    gpu_memory_utilization=0.87, enable_prefix_caching=True, load_format='dummy', skip_tokenizer_init=True)\n"
    "print('REPROFLEET_POC_DONE engine constructed')\n"
)
DOCKER = (
    "docker run --rm --gpus all --ipc host --env HF_HUB_OFFLINE=1 --env CUTE_DSL_ARCH=sm_120a "
    "--env VLLM_USE_FLASHINFER_SAMPLER=0 --env VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 "
    "--env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    "--mount type=bind,src=/root/cache,dst=/root/.cache/vllm "
    "--mount type=bind,src=/root/poc.py,dst=/poc.py,readonly "
    "--entrypoint python3 vllm/vllm-openai:v0.25.1 /poc.py"
)
FAST = dict(time_scale=0.01, boot_delay_s=0.3)


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def push_poc(host, text: str = STAND_IN) -> None:
    subprocess.run(host.ssh_argv("mkdir -p /root/cache && cat > /root/poc.py"), input=text, text=True,
                   check=True, timeout=20)


def test_clean_and_error_starts_exit_0_and_1_inside_a_container(sim_fleet) -> None:
    fleet = sim_fleet([SimHostSpec("dk", script=("clean", "error"), **FAST)])
    host = fleet.hosts[0]
    push_poc(host)
    clean = host.ssh(DOCKER + " 2>&1; echo rc=$?; ls /root/cache")
    assert clean.stdout.splitlines()[-3:] == ["REPROFLEET_POC_DONE engine constructed", "rc=0", "torch_compile_cache"]
    assert "(EngineCore pid=" in clean.stdout and "Graph capturing finished" in clean.stdout
    failed = host.ssh(DOCKER + " 2>&1; echo rc=$?")
    assert failed.stdout.splitlines()[-1] == "rc=1"
    assert "RuntimeError: Engine core initialization failed" in failed.stdout
    assert not host.ssh("ls /poc.py").returncode == 0  # the bind mount lived in the container only


def test_a_scripted_wedge_freezes_the_host_mid_start_and_leaves_an_xid_for_the_next_boot(sim_fleet) -> None:
    fleet = sim_fleet([SimHostSpec("wg", script=("wedge",), xid_on_wedge=True, **FAST)])
    host = fleet.hosts[0]
    push_poc(host)
    session = subprocess.Popen(host.ssh_argv(DOCKER + " 2>&1"), stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not host.is_frozen and time.monotonic() < deadline:
        time.sleep(0.02)
    assert host.is_frozen and host.ssh_banner(0.5) is None
    session.kill()
    out = session.communicate(timeout=5)[0]
    assert out.splitlines()[-1].endswith("Skipping CuTeDSL warmup because no compile units were requested.")
    wedged_boot = host.boot_id
    host.power_cycle(dwell_s=0.1)
    previous = host.ssh("journalctl -k -b -1 -o short-iso --no-pager | tail -1").stdout
    assert "NVRM: Xid (PCI:0000:01:00): 79" in previous
    assert host.decisions()[0]["boot_id"] == wedged_boot and host.decisions()[0]["outcome"] == "wedge"


def test_a_reboot_outcome_resets_the_host_by_itself_and_a_volatile_journal_forgets(sim_fleet) -> None:
    fleet = sim_fleet([SimHostSpec("rb", script=("reboot",), journal_persistent=False, hardware_watchdog=True, **FAST)])
    host = fleet.hosts[0]
    push_poc(host)
    first = host.boot_id
    session = subprocess.Popen(host.ssh_argv(DOCKER), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while host.boot_id == first and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host.boot_id != first
    session.wait(timeout=10)
    host.wait_ssh(10)
    lost = host.ssh("journalctl -k -b -1 --no-pager; echo rc=$?; test -d /var/log/journal || echo volatile")
    assert "No such boot ID in journal" in lost.stderr and lost.stdout.split() == ["rc=1", "volatile"]
    assert [e["event"] for e in fleet.events() if e.get("host") == "rb"][-3:] == ["power_off", "power_on", "boot"]


def test_sigterm_to_docker_run_with_init_ends_a_hung_container(sim_fleet) -> None:
    fleet = sim_fleet([SimHostSpec("tm", script=("hang",), **FAST)])
    host = fleet.hosts[0]
    push_poc(host)
    with_init = DOCKER.replace("docker run --rm", "docker run --rm --init")  # proxied to the init, passed on to python
    result = host.ssh(f"{with_init} >/dev/null 2>&1 & docker=$!; "
                      "for i in $(seq 100); do grep -q cuda_graph_capture /etc/reprofleet-sim/hw/gpu0.load.json "
                      "2>/dev/null && break; sleep 0.05; done; "
                      "kill -TERM $docker; wait $docker; echo rc=$?")
    assert result.stdout.split() == ["rc=143"], result.stdout + result.stderr
    deadline = time.monotonic() + 5
    while any("/poc.py" in cmdline(pid) for pid in host.cgroup.pids()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any("/poc.py" in cmdline(pid) for pid in host.cgroup.pids())
    assert host.decisions()[0]["outcome"] == "hang"


@pytest.mark.skipif(not REAL_POC.exists(), reason="playbooks/poc/sm120_hostwedge.py is not written yet")
def test_the_playbooks_real_poc_runs_unchanged_against_the_fake_vllm(sim_fleet) -> None:
    fleet = sim_fleet([SimHostSpec("rp", script=("clean",), **FAST)])
    host = fleet.hosts[0]
    push_poc(host, REAL_POC.read_text())
    result = host.ssh(DOCKER + " 2>&1; echo rc=$?")
    assert result.stdout.splitlines()[-2:] == ["REPROFLEET_POC_DONE engine constructed", "rc=0"], result.stdout[-2000:]
    assert host.decisions()[0]["conditions"]["spec_tokens"] == 9
