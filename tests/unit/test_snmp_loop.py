"""pysnmp leaves nothing pending: no "Task was destroyed but it is pending!", no unclosed
transport, whichever thread a driver is used on, dropped from, or collected in.

A campaign printed the first 20 times in 4 minutes: a driver collected inside another
driver's running loop closed its own loop with pysnmp's timer task still pending. Each case
runs in a child interpreter in development mode (``-X dev``: ResourceWarnings shown, asyncio's
debug checks on), so what asyncio and the collector print at exit is seen too.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reprofleet.sim.power import SnmpPdu
from tests.support import paths

CHILD = textwrap.dedent("""
    import asyncio, gc, sys, threading
    from reprofleet.credentials import Secret
    from reprofleet.errors import PowerError
    from reprofleet.model import CredentialRef, PowerPort, frozen_mapping
    from reprofleet.power import PowerLog, driver_for

    address, community = sys.argv[1], sys.argv[2]
    kept = []

    def driver():
        options = frozen_mapping({"model": "apc_rpdu", "timeout_s": 0.2, "tries": 1, "poll_s": 0.05})
        port = PowerPort("snmp", address, "1", CredentialRef("env", "UNUSED"), options)
        return driver_for(port, "ws01", PowerLog(None), secrets=lambda ref: Secret(community))

    def ask(d):
        try:
            print("state", d.status().value, flush=True)
        except PowerError as exc:
            print("failed", "no SNMP answer" in str(exc), flush=True)

    def on_a_thread(keep):
        d = driver()
        ask(d)
        ask(d)
        if keep:
            kept.append(d)  # alive until the interpreter exits

    async def collected_inside_a_running_loop():
        d = driver()
        await asyncio.to_thread(ask, d)
        del d
        gc.collect()  # its __del__ runs here, with this loop running in this thread
        await asyncio.sleep(0.05)

    threads = [threading.Thread(target=on_a_thread, args=(i == 0,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gc.collect()
    asyncio.run(collected_inside_a_running_loop())
    closed = driver()
    ask(closed)
    closed.close()
    print("done", flush=True)
""")


def _child(address: str, community: str) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-X", "dev", "-c", CHILD, address, community], capture_output=True, check=False,
                          text=True, timeout=60, cwd=paths.TESTS)
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def _assert_nothing_leaked(stderr: str) -> None:
    assert "Task was destroyed" not in stderr, stderr
    assert "ResourceWarning" not in stderr, stderr
    assert "Exception ignored" not in stderr, stderr


def test_requests_that_time_out_leave_no_pending_task_nor_open_transport() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:  # bound, never answers
        silent.bind(("127.0.0.1", 0))
        stdout, stderr = _child(f"127.0.0.1:{silent.getsockname()[1]}", "public")
    assert stdout.split("\n").count("failed True") == 8 and stdout.endswith("done\n"), stdout
    _assert_nothing_leaked(stderr)


def test_answered_requests_leave_no_pending_task_nor_open_transport(tmp_path: Path) -> None:
    switch = tmp_path / "power"
    switch.write_text("on\n")
    with SnmpPdu(tmp_path / "pdu", {"1": switch}, community="loop-comm-3") as pdu:
        stdout, stderr = _child(pdu.address, pdu.secret)
    assert stdout.split("\n").count("state on") == 8 and stdout.endswith("done\n"), stdout
    _assert_nothing_leaked(stderr)


def test_a_closed_engine_and_a_shut_loop_leave_no_task_behind(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """In process, on a loop of the test's own: what the child's exit cannot show (its loop is never collected)."""
    from reprofleet.credentials import Secret
    from reprofleet.model import CredentialRef, PowerPort, frozen_mapping
    from reprofleet.power import PowerLog, PowerState, driver_for
    from reprofleet.power.drivers import snmp_loop

    own = snmp_loop._SnmpLoop()
    monkeypatch.setattr(snmp_loop, "_current", own)
    switch = tmp_path / "power"
    switch.write_text("on\n")
    with SnmpPdu(tmp_path / "pdu", {"1": switch}, community="loop-comm-4") as pdu:
        port = PowerPort("snmp", pdu.address, "1", CredentialRef("env", "UNUSED"), frozen_mapping({"model": "apc_rpdu"}))
        closed, kept = (driver_for(port, "ws01", PowerLog(None), secrets=lambda ref: Secret(pdu.secret))
                        for _ in range(2))
        assert closed.status() is PowerState.ON and kept.status() is PowerState.ON
        assert len(_pending(own)) == 2  # each engine's timer task, until its engine is closed
        closed.close()
        assert len(_pending(own)) == 1
        own.shut()
    assert own.loop.is_closed() and not own.thread.is_alive()
    assert [task for task in asyncio.all_tasks(own.loop) if not task.done()] == []


def _pending(own: object) -> list[asyncio.Task[object]]:
    async def others() -> list[asyncio.Task[object]]:
        return [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    return own.run(others(), 5.0)  # type: ignore[attr-defined,no-any-return]


def test_a_request_cannot_wait_on_the_loop_that_would_answer_it() -> None:
    from reprofleet.power.drivers import snmp_loop

    async def nothing() -> None:
        return None

    loop = snmp_loop.shared()
    caught = loop.run(_from_the_loop(loop, nothing), 5.0)
    assert isinstance(caught, RuntimeError) and "cannot wait on the loop" in str(caught)


async def _from_the_loop(loop: object, make: object) -> BaseException | None:
    try:
        loop.run(make(), 1.0)  # type: ignore[attr-defined,operator]
    except RuntimeError as exc:
        return exc
    return None
