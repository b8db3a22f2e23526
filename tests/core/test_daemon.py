"""The daemon skeleton: warm stop, forced stop, signals, outages, periodic tasks, the summary.

Time is a fake monotonic clock here; the real processes (SIGTERM once, twice) are
tested on the relay and the consumer themselves (tests/producers/test_relay.py,
tests/app/test_consume_cli.py).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading

import pytest
import redis

import hubsync.core.daemon as daemon_module
from hubsync.core.daemon import Daemon, HealthKey, Periodic, RedisOutages, swap_signal_handlers
from hubsync.core.logs import JsonFormatter
from tests.helpers.support import REPO_ROOT


class FakeMonotonic:
    """Seconds that stand still until ``advance``."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def exits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """``os._exit`` recorded, not run: the handler's own decision is what is tested."""
    recorded: list[int] = []
    monkeypatch.setattr(os, "_exit", recorded.append)
    return recorded


def installed_handler() -> daemon_module.SignalHandler:
    handler = signal.getsignal(signal.SIGTERM)
    assert callable(handler), "a Python handler, not SIG_DFL or SIG_IGN"
    return handler


def test_request_stop_sets_the_stop_event_and_wakes_a_wait() -> None:
    daemon = Daemon("test")
    assert not daemon.stopping
    woke = threading.Event()

    def waiter() -> None:
        if daemon.wait(30):
            woke.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    daemon.request_stop()
    thread.join(timeout=5)
    assert daemon.stopping and woke.is_set()


def test_the_first_signal_asks_for_a_warm_stop_and_logs_it(
    exits: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    daemon = Daemon("relay r1")
    caplog.set_level(logging.INFO, logger=daemon_module.__name__)
    with daemon.stop_signals():
        installed_handler()(signal.SIGTERM, None)
    assert daemon.stopping
    assert exits == []
    assert "relay r1: received SIGTERM; finishing the current batch, then exiting" in caplog.text


def test_a_second_signal_forces_the_stop_with_128_plus_its_number(exits: list[int]) -> None:
    daemon = Daemon("consumer c1")
    with daemon.stop_signals():
        handle = installed_handler()
        handle(signal.SIGTERM, None)
        assert exits == []
        handle(signal.SIGINT, None)
    assert exits == [128 + signal.SIGINT]


def test_a_second_signal_inside_the_first_handler_still_exits(exits: list[int]) -> None:
    # A signal can run its handler inside the first one's, at any bytecode: here while the
    # first writes its log line. The second must exit even then.
    daemon = Daemon("nested")

    class SecondSignalWhileLogging(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "finishing the current batch" in record.getMessage() and not exits:
                handle(signal.SIGTERM, None)

    catcher = SecondSignalWhileLogging()
    logger = logging.getLogger(daemon_module.__name__)
    logger.addHandler(catcher)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        with daemon.stop_signals():
            handle = installed_handler()
            handle(signal.SIGTERM, None)
    finally:
        logger.removeHandler(catcher)
        logger.setLevel(level)
    assert daemon.stopping
    assert exits == [128 + signal.SIGTERM]


def test_the_previous_handlers_come_back_on_the_way_out() -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    daemon = Daemon("test")
    with daemon.stop_signals():
        assert signal.getsignal(signal.SIGTERM) == daemon._on_signal
        with daemon.stop_signals():  # nested: installed once, restored by the outer one
            pass
        assert signal.getsignal(signal.SIGTERM) == daemon._on_signal
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_handle_signals_false_leaves_the_embedding_programs_handlers_alone() -> None:
    def own(signum: int, frame: object) -> None:
        pass

    restore = swap_signal_handlers([signal.SIGTERM], own)
    try:
        with Daemon("embedded", handle_signals=False).stop_signals():
            assert signal.getsignal(signal.SIGTERM) is own
    finally:
        restore()


def test_off_the_main_thread_no_handler_is_installed() -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def in_thread() -> None:
        with Daemon("threaded").stop_signals():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join(timeout=5)
    assert seen == [before]


def test_only_the_skeleton_installs_signal_handlers() -> None:
    excluded = {"demo", "benchmarks", "servers", "processes"}
    installers = [
        path.relative_to(REPO_ROOT).as_posix()
        for top in ("hubsync", "producers", "consumers", "hubstore")
        for path in (REPO_ROOT / top).rglob("*.py")
        if not excluded & set(path.relative_to(REPO_ROOT).parts[:-1])
        and "signal.signal(" in path.read_text(encoding="utf-8")
    ]
    assert installers == ["hubsync/core/daemon.py"]


def test_periodic_tasks_run_when_due_on_the_injected_clock() -> None:
    clock = FakeMonotonic()
    ran: list[float] = []
    every_five = Periodic(5.0, clock)
    every_five.run(lambda: ran.append(clock.now))  # due at once: runs
    assert ran == [100.0]
    clock.advance(4.9)
    assert not every_five.due()
    every_five.run(lambda: ran.append(clock.now))
    assert ran == [100.0]
    clock.advance(0.1)
    assert every_five.due()
    assert every_five.run(lambda: 7) == 7
    every_five.reset()
    assert every_five.due(), "reset makes it due at once"


def test_a_periodic_task_that_raised_stays_due() -> None:
    clock = FakeMonotonic()
    task = Periodic(10.0, clock)

    def fail() -> None:
        raise redis.ConnectionError("down")

    with pytest.raises(redis.ConnectionError):
        task.run(fail)
    assert task.due()
    task.run(lambda: None)
    assert not task.due()


def test_an_outage_is_logged_once_each_way_with_its_length(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeMonotonic()
    outages = RedisOutages("consumer c1", monotonic=clock)
    caplog.set_level(logging.INFO, logger=daemon_module.__name__)
    outages.succeeded()
    assert caplog.text == "" and outages.up
    for _ in range(5):
        outages.failed(redis.ConnectionError("refused"))
        clock.advance(1.0)
    assert not outages.up
    for _ in range(3):
        outages.succeeded()
    lines = [record.getMessage() for record in caplog.records]
    assert lines == [
        "consumer c1: Redis unreachable (ConnectionError); retrying with backoff",
        "consumer c1: Redis reachable again after 5.0s",
    ]
    assert [record.levelname for record in caplog.records] == ["WARNING", "INFO"]
    outages.failed(redis.TimeoutError())
    assert outages.count == 2


def test_a_daemon_chooses_the_words_of_its_outage_lines(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeMonotonic()
    outages = RedisOutages(
        "relay r1", down="Redis unavailable ({error}); rows stay pending", monotonic=clock
    )
    caplog.set_level(logging.INFO, logger=daemon_module.__name__)
    outages.failed(redis.ReadOnlyError("READONLY"))
    clock.advance(2.5)
    outages.succeeded()
    assert [record.getMessage() for record in caplog.records] == [
        "relay r1: Redis unavailable (ReadOnlyError); rows stay pending",
        "relay r1: Redis reachable again after 2.5s",
    ]


def test_the_summary_is_one_line_and_its_figures_are_json_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    daemon = Daemon("consumer c1")
    caplog.set_level(logging.INFO, logger=daemon_module.__name__)
    daemon.log_summary("consumer c1 stopped after 1.0s: 3 entries read", {"read": 3, "dead": 0})
    [record] = caplog.records
    assert record.getMessage() == "consumer c1 stopped after 1.0s: 3 entries read"
    assert "\n" not in record.getMessage()
    document = json.loads(JsonFormatter().format(record))
    assert document["message"] == "consumer c1 stopped after 1.0s: 3 entries read"
    assert document["daemon"] == "consumer c1"
    assert document["summary"] == {"read": 3, "dead": 0}


def test_the_health_key_lives_for_its_ttl_and_a_clean_stop_deletes_it(
    redis_client: redis.Redis,
) -> None:
    health = HealthKey("hubsync:health:test:one", ttl=30.0)
    health.write(redis_client, json.dumps({"pid": 1}))
    assert json.loads(redis_client.get(health.key) or b"{}") == {"pid": 1}
    assert 29_000 < redis_client.pttl(health.key) <= 30_000
    health.clear(redis_client)
    assert not redis_client.exists(health.key)


def test_clearing_the_health_key_without_redis_is_left_to_the_ttl() -> None:
    unreachable = redis.Redis(port=1, socket_connect_timeout=0.2)
    HealthKey("hubsync:health:test:two", ttl=1.0).clear(unreachable)  # no error
