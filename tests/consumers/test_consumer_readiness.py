"""A consumer's readiness follows its hub store: a private PostgreSQL server stopped (a crash)
and started again under a running worker, on a real private Redis."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import redis

from consumers.stream.worker import HubConsumer
from hubstore import open_store
from hubsync.core.settings import ConsumerSettings
from hubsync.servers.postgres import PostgresServer, PostgresUnavailable
from tests.helpers.support import unavailable, wait_until


@pytest.fixture
def durable_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this test's own, durable (what committed survives a crash)."""
    try:
        server = PostgresServer.start({})
    except PostgresUnavailable as exc:
        unavailable(str(exc))
    with server:
        yield server


def test_a_consumer_is_unready_while_its_hub_store_is_down_and_ready_once_it_is_back(
    durable_postgres: PostgresServer, redis_client: redis.Redis, redis_url: str
) -> None:
    url = durable_postgres.url()
    # a short budget: a store call fails within 2 s of the server going away
    with open_store(url, create_schema=True, busy_budget=2.0) as store:
        settings = ConsumerSettings(hub_url=url, redis_url=redis_url, block_ms=50)
        worker = HubConsumer(redis_client, store, settings, name="ready-1", handle_signals=False)
        assert worker.readiness.problems() == ["loop not started"]
        running = threading.Thread(target=worker.run, daemon=True)
        running.start()
        try:
            wait_until(lambda: worker.readiness.ready, timeout=30, what="the worker ready")

            durable_postgres.stop("immediate")
            wait_until(
                lambda: worker.readiness.problems() == ["hub store failing"],
                timeout=30,
                what="unready for its store only (Redis is fine)",
            )

            durable_postgres.start_again()
            wait_until(lambda: worker.readiness.ready, timeout=30, what="ready again")
        finally:
            worker.request_stop()
            running.join(timeout=30)
    assert worker.readiness.problems() == ["stopping"]
