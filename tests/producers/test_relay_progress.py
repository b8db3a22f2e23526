"""A relay draining a backlog says how far it is, how fast it goes and how long is left.

``DrainProgress`` is driven by hand on an injected clock; then a real relay drains a
real backlog into a private Redis, the hub's acks written by the hub double, its clock
moved by the test, and its lines and gauges are checked against the outbox.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hubsync.core.logs import JsonFormatter
from hubsync.core.metrics import RELAY_REGISTRY
from producers.relay import Relay
from producers.relay.progress import DrainProgress, DrainReading
from tests.helpers.clock import FakeClock
from tests.helpers.hub_double import ack_events, stream_events
from tests.helpers.relay_support import append_many, make_runtime, relay_settings
from tests.helpers.support import wait_until

LOGGER = "producers.relay.progress"
LABEL = "relay rt-test"
INTERVAL = 5.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=1000.0)


@pytest.fixture
def progress(clock: FakeClock) -> DrainProgress:
    return DrainProgress(LABEL, INTERVAL, clock)


@pytest.fixture
def lines(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """What the test logs, progress records included (INFO)."""
    with caplog.at_level(logging.INFO, logger=LOGGER):
        yield caplog


def progress_records(lines: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in lines.records if r.name == LOGGER]


def progress_lines(lines: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in progress_records(lines)]


def gauge(name: str) -> float | None:
    return RELAY_REGISTRY.get_sample_value(name)


def samples(
    progress: DrainProgress, clock: FakeClock, *points: tuple[int, int]
) -> list[float | None]:
    """Feed (backlog, settled) one interval apart (the first now); the ETAs read."""
    etas = []
    for index, (backlog, settled) in enumerate(points):
        if index:
            clock.advance(INTERVAL)
        etas.append(progress.sample(backlog, settled).eta_seconds)
    return etas


def test_a_draining_backlog_logs_rows_left_rate_and_time_left_every_interval(
    progress: DrainProgress, clock: FakeClock, lines: pytest.LogCaptureFixture
) -> None:
    samples(progress, clock, (10_000, 0), (8_000, 2_000), (5_000, 5_000))

    assert progress_lines(lines) == [
        f"{LABEL}: draining the outbox backlog: 8000 rows left, 400.0 rows/s acked over the "
        "last 5.0s, about 20.0s left",
        f"{LABEL}: draining the outbox backlog: 5000 rows left, 500.0 rows/s acked over the "
        "last 10.0s, about 10.0s left",
    ]
    assert gauge("hubsync_relay_drain_rows_per_second") == 500.0
    assert gauge("hubsync_relay_drain_eta_seconds") == 10.0


def test_the_first_sample_logs_nothing_and_has_no_rate(
    progress: DrainProgress, lines: pytest.LogCaptureFixture
) -> None:
    reading = progress.sample(10_000, 0)

    assert progress_lines(lines) == []
    assert (reading.settled_per_second, reading.window_seconds, reading.eta_seconds) == (
        0.0,
        0.0,
        None,
    )
    assert gauge("hubsync_relay_drain_eta_seconds") == math.inf


def test_a_relay_that_keeps_up_or_has_nothing_to_do_logs_nothing(
    progress: DrainProgress, clock: FakeClock, lines: pytest.LogCaptureFixture
) -> None:
    # rows in flight at each sample, fewer than an interval's acks; then idle; then a row
    # appended just before a sample after idling
    samples(progress, clock, (30, 0), (25, 4_000), (40, 8_000), (0, 8_040), (0, 8_040), (1, 8_040))

    assert progress_lines(lines) == []
    assert progress.last is not None and progress.last.backlog == 1


def test_the_rate_spans_the_last_six_intervals_only(
    progress: DrainProgress, clock: FakeClock
) -> None:
    # 100 rows/s for six intervals, then 1000 rows/s for six more
    points = [(100_000 - 500 * i, 500 * i) for i in range(7)]
    points += [(97_000 - 5_000 * i, 3_000 + 5_000 * i) for i in range(1, 7)]
    samples(progress, clock, *points)

    reading = progress.last
    assert reading is not None
    assert reading.window_seconds == 6 * INTERVAL
    assert reading.settled_per_second == 1000.0
    assert reading.eta_seconds == pytest.approx(67_000 / 1000.0)


def test_a_backlog_growing_faster_than_it_is_acked_has_no_estimate(
    progress: DrainProgress, clock: FakeClock, lines: pytest.LogCaptureFixture
) -> None:
    etas = samples(progress, clock, (1_000, 0), (1_500, 500))

    assert etas == [None, None]
    [line] = progress_lines(lines)
    assert line == (
        f"{LABEL}: draining the outbox backlog: 1500 rows left, 100.0 rows/s acked over the "
        "last 5.0s, not shrinking (new rows arrive as fast as rows are acked)"
    )
    assert progress.last is not None and progress.last.shrink_per_second == -100.0
    assert gauge("hubsync_relay_drain_eta_seconds") == math.inf


def test_a_backlog_that_does_not_move_is_logged_once_until_it_moves_again(
    progress: DrainProgress, clock: FakeClock, lines: pytest.LogCaptureFixture
) -> None:
    samples(progress, clock, (2_000, 0), (2_000, 0), (2_000, 0), (2_000, 0))
    assert progress_lines(lines) == [
        f"{LABEL}: outbox backlog of 2000 rows not moving: nothing acked in the last 5.0s; the "
        "rows stay pending (is a hub consumer running, and the runtime enrolled for their hub "
        "projects?)"
    ]

    clock.advance(INTERVAL)
    progress.sample(1_500, 500)  # moving again: a line each interval
    clock.advance(INTERVAL)
    progress.sample(1_500, 500)  # stuck again: said once more
    clock.advance(INTERVAL)
    progress.sample(1_500, 500)

    _, moving, stalled_again = progress_lines(lines)
    assert "draining the outbox backlog: 1500 rows left" in moving
    assert "1500 rows not moving" in stalled_again


def test_a_logged_backlog_that_is_done_says_so_once_then_nothing(
    progress: DrainProgress, clock: FakeClock, lines: pytest.LogCaptureFixture
) -> None:
    etas = samples(progress, clock, (3_000, 0), (2_000, 1_000), (0, 3_000), (0, 3_000))

    assert etas[2:] == [0.0, 0.0]
    assert progress_lines(lines)[1:] == [
        f"{LABEL}: caught up with the outbox backlog: 0 rows pending, 300.0 rows/s acked over "
        "the last 10.0s"
    ]
    assert gauge("hubsync_relay_drain_eta_seconds") == 0.0


def test_a_json_log_record_carries_the_figures_of_the_line(
    progress: DrainProgress, clock: FakeClock, lines: pytest.LogCaptureFixture
) -> None:
    samples(progress, clock, (1_000, 0), (900, 100), (1_200, 150))

    drain, growing = (json.loads(JsonFormatter().format(r)) for r in progress_records(lines))
    assert drain["daemon"] == LABEL
    assert drain["progress"] == {
        "backlog": 900,
        "settled_per_second": 20.0,
        "shrink_per_second": 20.0,
        "window_seconds": 5.0,
        "eta_seconds": 45.0,
    }
    assert growing["progress"]["eta_seconds"] is None, "no estimate is null, not a string"


# -- a real relay ------------------------------------------------------------


def test_a_real_relay_draining_a_backlog_logs_its_progress_and_sets_its_gauges(
    tmp_path: Path,
    redis_url: str,
    redis_client: redis.Redis,
    clock: FakeClock,
    lines: pytest.LogCaptureFixture,
) -> None:
    state_dir = tmp_path / "state"
    registry, (store,) = make_runtime(state_dir, ["alpha"])
    append_many(store, runs=3, per_run=100)
    settings = relay_settings(state_dir, redis_url, progress_interval=INTERVAL, resend_timeout=3600)
    relay = Relay(settings, registry, handle_signals=False, monotonic=clock)
    thread = threading.Thread(target=relay.run, name="relay-under-test")
    thread.start()
    try:
        wait_until(lambda: relay.progress.last is not None, what="the first sample")
        wait_until(lambda: len(stream_events(redis_client, "alpha")) == 300, what="sends")
        events = stream_events(redis_client, "alpha")

        ack_events(redis_client, "alpha", events[:100])
        wait_until(lambda: relay.ack_stats.acked == 100, what="the first acks")
        clock.advance(INTERVAL)
        reading = wait_until(lambda: _sampled_over(relay, INTERVAL), what="a second sample")
        assert reading is not None and reading.backlog == store.outbox_counts()["pending"] == 200
        assert progress_lines(lines) == [
            f"relay {registry.runtime_id}: draining the outbox backlog: 200 rows left, 20.0 "
            "rows/s acked over the last 5.0s, about 10.0s left"
        ]
        assert gauge("hubsync_relay_drain_rows_per_second") == 20.0
        assert gauge("hubsync_relay_drain_eta_seconds") == 10.0
        labels = {"project": store.project_id, "runtime": registry.runtime_id}
        backlog = RELAY_REGISTRY.get_sample_value("hubsync_outbox_backlog", labels)
        assert backlog == 200

        ack_events(redis_client, "alpha", events[100:])
        wait_until(lambda: relay.ack_stats.acked == 300, what="the other acks")
        clock.advance(INTERVAL)
        reading = wait_until(lambda: _sampled_over(relay, 2 * INTERVAL), what="a third sample")
        assert reading is not None and reading.backlog == store.outbox_counts()["pending"] == 0
        assert gauge("hubsync_relay_drain_rows_per_second") == 30.0
        assert gauge("hubsync_relay_drain_eta_seconds") == 0.0

        clock.advance(INTERVAL)  # nothing to do: no line
        wait_until(lambda: _sampled_over(relay, 3 * INTERVAL), what="an idle sample")
    finally:
        relay.request_stop()
        thread.join(timeout=30)
        relay.close()
    assert progress_lines(lines)[1:] == [
        f"relay {registry.runtime_id}: caught up with the outbox backlog: 0 rows pending, 30.0 "
        "rows/s acked over the last 10.0s"
    ]


def _sampled_over(relay: Relay, window: float) -> DrainReading | None:
    """The relay's latest reading once its rates span ``window`` seconds, else None."""
    reading = relay.progress.last
    return reading if reading is not None and reading.window_seconds == window else None
