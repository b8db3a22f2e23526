"""The PostgreSQL hub store after a long outage of its server: it answers again within seconds
of the server's return, with what it had committed before the crash.

A durable server of the test's own is stopped (immediate: a crash), the store is asked
for work all through a 35 s outage, and the server is started again.
"""

from __future__ import annotations

import time

import pytest

from hubstore import open_store
from hubstore.errors import StoreError
from hubstore.postgres.connection import RECONNECT_TIMEOUT
from hubstore.store import HubStore
from hubsync.servers.postgres import PostgresServer, PostgresUnavailable
from tests.helpers.support import unavailable, wait_until


def _answers(store: HubStore) -> bool:
    try:
        store.hub_id()
    except StoreError:
        return False
    return True


@pytest.mark.timeout(240)
def test_the_store_answers_within_seconds_of_its_server_coming_back_from_a_long_outage() -> None:
    # A failover can take a while. The pool keeps trying to reconnect meanwhile, and its
    # tries must stay close together: the store answers soon after the server is back
    # (psycopg_pool's own backoff, left alone, doubles the pause between tries up to
    # minutes, which would keep every consumer idle that long after a 30 s outage).
    try:
        server = PostgresServer.start({})  # durable: what committed survives the crash below
    except PostgresUnavailable as exc:
        unavailable(str(exc))
    with server, open_store(server.url(), create_schema=True, busy_budget=5.0) as store:
        hub_id = store.init_hub()
        server.stop("immediate")
        outage_ends = time.monotonic() + 35
        while time.monotonic() < outage_ends:  # the store is asked for work all along
            assert not _answers(store)
        server.start_again()
        # a round of the pool's tries lasts RECONNECT_TIMEOUT (10 s): the next try comes soon
        wait_until(
            lambda: _answers(store),
            timeout=RECONNECT_TIMEOUT + 5,
            interval=0.1,
            what="the store to answer within seconds of its server coming back",
        )
        assert store.hub_id() == hub_id
