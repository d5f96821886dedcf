"""Notifications: what a campaign tells a person, each thing once, and a receiver that fails
costs one event, never the campaign. Decisions with an injected sender; then a campaign at
the host seam told to a local Apprise json:// receiver and a command."""

from __future__ import annotations

import base64
import http.server
import json
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from reprofleet.campaign.notify import Notice, NoticeKind, Notifier
from reprofleet.campaign.notify_senders import CommandSender, NotifyError, build_send, parse_settings, resolve_url
from reprofleet.campaign.observe import Ended, EventWriter, Watched
from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.clock import VirtualClock
from reprofleet.errors import CredentialError, InputError
from reprofleet.model import Host, PowerPort
from reprofleet.records.store import CampaignDir, JsonlAppender, read_log_lines
from reprofleet.runner.recovery import recovery_factory
from tests.support.seam_host import Device, FakeHost, seam_book, seam_settings
from tests.support import paths


def _watched(tmp_path: Path, hosts: tuple[Host, ...] = ()) -> tuple[Watched, CampaignDir]:
    directory = CampaignDir(tmp_path / "c-1").create()
    return Watched("c-1", directory, seam_book(tmp_path / "book"), hosts), directory


def _notifier(tmp_path: Path, hosts: tuple[Host, ...] = (), **kwargs: Any) -> tuple[Notifier, list[Notice], CampaignDir]:
    sent: list[Notice] = []
    notifier = Notifier(sent.append, verdicts=lambda folder: ["ref: reproduces (1 of 1)"], **kwargs)
    watched, directory = _watched(tmp_path, hosts)
    notifier.started(watched, EventWriter(JsonlAppender(directory.events)))
    return notifier, sent, directory


def _record(attempt: str, outcome: str, cell: str = "ref", host: str = "ws1") -> dict[str, Any]:
    return {"schema": 1, "attempt": attempt, "cell": cell, "host": host, "outcome": outcome, "attempt_index": 0,
            "last_phase": "cuda_graph_capture", "reason": "exit 0" if outcome == "clean" else "host stopped answering"}


def test_each_quarantine_and_each_cells_first_reproduction_is_told_once(tmp_path: Path) -> None:
    notifier, sent, _ = _notifier(tmp_path)
    notifier.on_attempt_line(_record("a1", "clean"))
    notifier.on_attempt_line(_record("a2", "wedge"))
    notifier.on_attempt_line(_record("a3", "wedge"))  # the same cell again: said already
    notifier.on_attempt_line(_record("a4", "wedge", cell="pl-350"))
    for _ in range(2):
        notifier.on_event({"host": "ws1", "event": "quarantined", "reason": "power cycle budget spent"})
    notifier.on_event({"host": "ws1", "event": "probe"})  # nothing a person needs
    notifier.finished(Ended(quarantined={"ws1": "power cycle budget spent"}))
    assert [(n.kind, n.cell or n.host) for n in sent] == [
        (NoticeKind.FIRST_REPRODUCTION, "ref"), (NoticeKind.FIRST_REPRODUCTION, "pl-350"),
        (NoticeKind.QUARANTINED, "ws1"), (NoticeKind.FINISHED, "")]
    assert sent[2].body == "ws1: `power cycle budget spent`"  # a reason: the host's words, quoted
    assert sent[3].title == "reprofleet c-1: finished"
    assert sent[3].body.splitlines() == ["ref: reproduces (1 of 1)", "ws1: quarantined: `power cycle budget spent`"]


def test_an_amendment_that_makes_a_record_a_reproduction_is_its_first_reproduction(tmp_path: Path) -> None:
    notifier, sent, _ = _notifier(tmp_path)
    notifier.on_attempt_line(_record("a1", "infra"))
    notifier.on_attempt_line({"schema": 1, "amends": "a1", "forensics": {}})  # no outcome: nothing
    notifier.on_attempt_line({"schema": 1, "amends": "a1", "outcome": "reboot"})
    notifier.finished(Ended())
    assert [(n.kind, n.cell) for n in sent] == [(NoticeKind.FIRST_REPRODUCTION, "ref"), (NoticeKind.FINISHED, "")]


def test_a_resumed_campaign_does_not_tell_again_a_reproduction_its_folder_already_holds(tmp_path: Path) -> None:
    watched, directory = _watched(tmp_path)
    directory.attempts.write_text(json.dumps(_record("a1", "wedge")) + "\n")
    sent: list[Notice] = []
    notifier = Notifier(sent.append, verdicts=lambda folder: [])
    notifier.started(watched, EventWriter(JsonlAppender(directory.events)))
    notifier.on_attempt_line(_record("a2", "wedge"))
    notifier.on_attempt_line(_record("a3", "wedge", cell="other"))
    notifier.finished(Ended(interrupted=True))
    assert [(n.kind, n.cell) for n in sent] == [(NoticeKind.FIRST_REPRODUCTION, "other"), (NoticeKind.FINISHED, "")]
    assert sent[-1].title.endswith("stopped by a signal (--resume goes on)")


def test_a_host_that_needs_a_person_is_told_with_its_address_and_outlets(tmp_path: Path) -> None:
    plug = Host("ws3", "10.0.0.3", 2222, pdu=PowerPort("tasmota", "10.0.9.1", outlet="2"))
    notifier, sent, _ = _notifier(tmp_path, (plug, Host("ws4", "10.0.0.4")))
    for host in ("ws3", "ws4", "ws4"):  # every freeze of a host with no port needs a person again
        notifier.on_event({"host": host, "event": "needs_person", "message": "power-cycle it by hand"})
    notifier.finished(Ended())
    bodies = [n.body for n in sent if n.kind is NoticeKind.NEEDS_PERSON]
    assert bodies == ["ws3 at 10.0.0.3:2222 (outlets: tasmota 10.0.9.1 outlet 2): power-cycle it by hand",
                      "ws4 at 10.0.0.4:22 (outlets: none in the inventory): power-cycle it by hand",
                      "ws4 at 10.0.0.4:22 (outlets: none in the inventory): power-cycle it by hand"]


def test_a_hosts_reason_phase_and_failure_reach_a_notice_quoted_without_escapes_or_markup(tmp_path: Path) -> None:
    """A notice goes to services that draw Markdown and expand mentions (issue 34)."""
    attack = "\x1b\x1b[0m[2J\x1b]8;;https://evil.example\x07x` [link](https://evil.example) @channel <!here>\n# owned"
    notifier, sent, _ = _notifier(tmp_path)
    notifier.on_event({"host": "ws1", "event": "quarantined", "reason": attack})
    notifier.on_attempt_line({**_record("a1", "wedge"), "last_phase": attack})
    notifier.finished(Ended(failure=attack, quarantined={"ws1": attack}))
    shown = "x` [link](https://evil.example) @channel <!here> # owned"
    for notice in sent:
        assert not any(ord(ch) < 0x20 and ch != "\n" for ch in notice.title + notice.body), notice
        assert "\n# owned" not in notice.body
    assert sent[0].body == f"ws1: ``{shown}``"  # a backtick in the reason: a longer fence
    assert f"last phase ``{shown}``" in sent[1].body and sent[2].title.endswith(f"stopped: ``{shown}``")
    assert sent[2].body.splitlines()[-1] == f"ws1: quarantined: ``{shown}``"


def test_only_the_kinds_asked_for_are_sent(tmp_path: Path) -> None:
    notifier, sent, _ = _notifier(tmp_path, kinds=frozenset({NoticeKind.QUARANTINED}))
    notifier.on_attempt_line(_record("a1", "wedge"))
    notifier.on_event({"host": "ws1", "event": "quarantined", "reason": "r"})
    notifier.finished(Ended())
    assert [n.kind for n in sent] == [NoticeKind.QUARANTINED]


def test_a_failed_send_is_one_notify_failed_event_and_the_next_notice_still_goes(tmp_path: Path) -> None:
    sent: list[Notice] = []

    def send(notice: Notice) -> None:
        if notice.kind is NoticeKind.QUARANTINED:
            raise NotifyError("apprise: connection refused")
        sent.append(notice)

    watched, directory = _watched(tmp_path)
    notifier = Notifier(send, verdicts=lambda folder: [])
    notifier.started(watched, EventWriter(JsonlAppender(directory.events)))
    notifier.on_event({"host": "ws1", "event": "quarantined", "reason": "r"})
    notifier.finished(Ended())
    assert [n.kind for n in sent] == [NoticeKind.FINISHED]
    (failed,) = [e for e in read_log_lines(directory.events) if e["event"] == "notify_failed"]
    assert (failed["host"], failed["kind"], failed["message"]) == (
        "ws1", "host_quarantined", "NotifyError: apprise: connection refused")


# -- invoke.yaml's notify: ------------------------------------------------------------------

@pytest.mark.parametrize("section, field", [
    ({"url": ["json://x"]}, "notify.url"),
    ({"urls": [""]}, "notify.urls"),
    ({"command": "no-such-program-here --flag"}, "notify.command"),
    ({"command": "true", "kinds": ["wedge"]}, "notify.kinds"),
    ({"command": "true", "timeout_s": "soon"}, "notify.timeout_s"),
    ({"command": "true", "timeout_s": 0}, "notify.timeout_s"),
])
def test_a_wrong_notify_setting_is_one_line_naming_its_key(section: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_settings(section)
    assert str(caught.value).startswith(f"invoke.yaml:{field}: ")
    assert "\n" not in str(caught.value)


def test_no_notify_section_sends_nothing() -> None:
    assert not parse_settings(None).enabled
    assert parse_settings({"command": "true"}).command == ("true",)


def test_a_url_secret_comes_from_the_environment_and_never_shows_in_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_TOKEN", "s3cr3t-token")
    url, secrets = resolve_url("ntfys://{env:HOOK_TOKEN}@ntfy.example/lab")
    assert url.reveal() == "ntfys://s3cr3t-token@ntfy.example/lab"
    assert str(url) == "***" and [s.reveal() for s in secrets] == ["s3cr3t-token"]
    monkeypatch.delenv("HOOK_TOKEN")
    with pytest.raises(CredentialError, match="HOOK_TOKEN is not set"):
        resolve_url("ntfys://{env:HOOK_TOKEN}@ntfy.example/lab")


def test_a_command_that_fails_says_its_exit_status_and_stderr(tmp_path: Path) -> None:
    script = tmp_path / "fail.py"
    script.write_text("import sys\nsys.stdin.read()\nsys.stderr.write('no route to the pager\\n')\nsys.exit(3)\n")
    with pytest.raises(NotifyError, match=r"exited 3: no route to the pager"):
        CommandSender([sys.executable, str(script)], 10)(Notice(NoticeKind.FINISHED, "c", "t", "b"))


# -- a campaign told to real receivers ------------------------------------------------------

class _Receiver(http.server.BaseHTTPRequestHandler):
    posts: list[tuple[dict[str, Any], str]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).posts.append((json.loads(body), self.headers.get("Authorization") or ""))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[int, list[tuple[dict[str, Any], str]]]]:
    posts: list[tuple[dict[str, Any], str]] = []
    handler = type("Handler", (_Receiver,), {"posts": posts})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], posts
    server.shutdown()
    server.server_close()


def test_a_campaign_tells_an_apprise_receiver_and_a_command_each_event_exactly_once(
        tmp_path: Path, receiver: tuple[int, list[tuple[dict[str, Any], str]]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("apprise")
    port, posts = receiver
    monkeypatch.setenv("HOOK_PASSWORD", "pa55-w0rd")
    told = tmp_path / "told.jsonl"
    script = tmp_path / "tell.py"
    script.write_text("import sys\nopen(sys.argv[1], 'a').write(sys.stdin.read().replace('\\n', ' ') + '\\n')\n")
    settings = parse_settings({"urls": [f"json://lab:{{env:HOOK_PASSWORD}}@127.0.0.1:{port}/hook"],
                               "command": [sys.executable, str(script), str(told)]})
    clock = VirtualClock()
    # a dead PDU: its wedge is the cell's first reproduction, then recovery fails and it is quarantined
    broken = FakeHost(clock, "brk", script=("wedge", "clean"), device=Device(dead=True))
    # no power port: its freeze waits for a person, who comes 12 s later
    manual = FakeHost(clock, "manual", script=("wedge", "clean"), power=False, boot_delay_s=0.3, rescued_after_s=12.0)
    book = seam_book(tmp_path / "book", attempts=2, attempt_timeout=30, boot=15)
    for fake in (broken, manual):  # one host per run: virtual time is one timeline (seam_host.run_fake_campaign)
        plan = make_plan(book, [fake.host], "notify-1")
        run_campaign(plan, seam_settings(tmp_path), tmp_path / "reports", recovery_factory=recovery_factory,
                     clock=clock, port_for=lambda ctx, h, fake=fake: fake.port(ctx), network_ok=lambda: True,
                     observers=(Notifier(build_send(settings), kinds=settings.kinds),))
    expected = ["reprofleet notify-1: cell ref reproduced", "reprofleet notify-1: brk quarantined",
                "reprofleet notify-1: finished", "reprofleet notify-1: manual needs a person",
                "reprofleet notify-1: finished"]
    assert [post["title"] for post, _ in posts] == expected
    assert {auth for _, auth in posts} == {"Basic " + base64.b64encode(b"lab:pa55-w0rd").decode()}
    assert [json.loads(line)["title"] for line in told.read_text().splitlines()] == expected
    events = read_log_lines(tmp_path / "reports" / "notify-1" / "events.jsonl")
    assert not [e for e in events if e["event"] == "notify_failed" or (e["event"] == "warning" and not e["host"])]
    assert "pa55-w0rd" not in (tmp_path / "reports" / "notify-1" / "events.jsonl").read_text()


def test_the_shipped_invoke_yaml_notify_section_is_valid_and_sends_nothing() -> None:
    import yaml

    section = yaml.safe_load((paths.REPO / "invoke.yaml").read_text())["reprofleet"]["notify"]
    settings = parse_settings(section)
    assert not settings.enabled and settings.kinds == frozenset(NoticeKind)


def test_the_notify_command_gets_the_scrubbed_environment_without_the_bmc_password(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A named credential variable (an inventory's BMC password) never reaches the user's
    notify command: it gets the same scrubbed environment as every other child (issue 34 item 7)."""
    from reprofleet.credentials import name_credential_variables

    monkeypatch.setenv("RF_TEST_NOTIFY_BMC_PASSWORD", "hunter2-bmc")
    monkeypatch.setenv("RF_TEST_NOTIFY_PLAIN", "kept")
    name_credential_variables(["RF_TEST_NOTIFY_BMC_PASSWORD"])  # as inventory/hosts.py does for a password_env
    seen = tmp_path / "env.json"
    script = tmp_path / "dump_env.py"
    script.write_text(f"import json, os, sys\nsys.stdin.read()\nopen({str(seen)!r}, 'w').write(json.dumps(dict(os.environ)))\n")
    CommandSender([sys.executable, str(script)], 10)(Notice(NoticeKind.FINISHED, "c", "t", "b"))
    env = json.loads(seen.read_text())
    assert "RF_TEST_NOTIFY_BMC_PASSWORD" not in env and "hunter2-bmc" not in json.dumps(env)
    assert env["RF_TEST_NOTIFY_PLAIN"] == "kept" and env["REPROFLEET_NOTICE_KIND"] == NoticeKind.FINISHED.value
