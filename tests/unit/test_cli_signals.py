"""A stop signal always reaches the clean stop, even when saying so fails; nohup is honoured."""

from __future__ import annotations

import signal
import threading
from typing import Iterator

import pytest

from reprofleet.cli.signals import install_stop_handlers, stop_handler


@pytest.fixture
def saved_handlers() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def _dead_terminal(_text: str) -> None:
    raise BrokenPipeError(32, "Broken pipe")


def test_the_stop_is_set_even_when_the_terminal_that_sent_sighup_is_gone() -> None:
    stop = threading.Event()
    stop_handler(stop, _dead_terminal)(signal.SIGHUP, None)
    assert stop.is_set()


def test_the_stop_is_set_before_the_message_is_written() -> None:
    stop = threading.Event()
    seen: list[bool] = []
    stop_handler(stop, lambda _text: seen.append(stop.is_set()))(signal.SIGTERM, None)
    assert seen == [True]


def test_a_second_signal_forces_the_way_out() -> None:
    stop = threading.Event()
    handler = stop_handler(stop, lambda _text: None)
    handler(signal.SIGINT, None)
    with pytest.raises(KeyboardInterrupt):
        handler(signal.SIGINT, None)


def test_sighup_stays_ignored_under_nohup(saved_handlers: None) -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    routed = install_stop_handlers(threading.Event(), lambda _text: None)
    assert signal.SIGHUP not in routed and signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    assert signal.SIGTERM in routed and signal.SIGINT in routed


def test_sighup_stops_the_campaign_from_a_terminal(saved_handlers: None) -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    assert signal.SIGHUP in install_stop_handlers(threading.Event(), lambda _text: None)
