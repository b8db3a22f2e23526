"""The dashboard's own history: ingest rate and lag over the last 15 minutes, on an injected clock."""

from __future__ import annotations

from consumers.views.queue_status import GroupInfo, HubProjectStatus
from hubsync.cli.status_view import StatusReport
from hubsync.dashboard.history import WINDOW_SECONDS, History, sparkline_points
from tests.helpers.clock import FakeClock


def report(entries_added: int, lag: int | None, reachable: bool = True) -> StatusReport:
    group = GroupInfo("hub", lag, None, 0, None, None, "0-0", [])
    project = HubProjectStatus(
        "acme", "hubsync:{acme}:events:{*}", 0, entries_added, None, group, 0, 0
    )
    return StatusReport("now", "redis://x", reachable, hub_projects=[project])


def test_the_ingest_rate_is_the_growth_of_entries_added_over_the_time_between_samples() -> None:
    clock = FakeClock()
    history = History(clock)
    for added, lag in ((100, 5), (130, 2), (130, None)):
        history.record(report(added, lag))
        clock.advance(10)
    series = history.series("acme")
    assert series.ingest_rate == [(20.0, 3.0), (10.0, 0.0)]
    assert series.lag == [(30.0, 5.0), (20.0, 2.0)]  # Redis could not tell the last one


def test_a_stream_made_again_never_shows_a_negative_rate_and_old_samples_leave() -> None:
    clock = FakeClock()
    history = History(clock)
    history.record(report(500, 0))
    clock.advance(5)
    history.record(report(3, 0))  # deleted and made again: counting starts over
    assert history.series("acme").ingest_rate == [(0.0, 0.0)]
    clock.advance(WINDOW_SECONDS + 1)
    history.record(report(9, 1))
    history.record(report(0, 1, reachable=False))  # an outage adds nothing
    assert history.series("acme").lag == [(0.0, 1.0)]
    assert history.series("other").ingest_rate == []


def test_a_sparkline_puts_now_on_the_right_and_the_highest_value_at_the_top() -> None:
    points = sparkline_points([(WINDOW_SECONDS, 0.0), (0.0, 4.0), (450.0, 2.0)], 100, 44)
    assert points == "0.0,42.0 50.0,22.0 100.0,2.0"
    assert sparkline_points([], 100, 44) == ""
    # a younger history is drawn across the whole width
    assert sparkline_points([(60.0, 1.0), (30.0, 1.0), (0.0, 0.0)], 100, 44) == (
        "0.0,2.0 50.0,2.0 100.0,42.0"
    )
