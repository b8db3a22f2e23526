"""One hub per Redis namespace: ``bind_namespace`` on real Redis (a second hub's
``hubsync consume``, as real processes, is in ``tests/e2e/test_one_hub_per_namespace.py``)."""

from __future__ import annotations

import pytest
import redis

from consumers.stream.hub_binding import (
    NamespaceOwnedError,
    StoreBehindError,
    accept_restore,
    bind_namespace,
    namespace_mark,
    release_namespace,
)
from consumers.stream.publishing import Publication
from hubstore import open_store
from hubstore.store import HubStore
from hubsync.core import keys
from hubsync.core.errors import ConfigError
from tests.helpers.consumer_support import namespace_owner
from tests.helpers.relay_player import event_entry, sync_event

HUB_A = "hub-00000000000000aa"
HUB_B = "hub-00000000000000bb"


# ----- the bind function -----


def test_a_free_namespace_is_bound_to_the_first_hub_and_kept_by_it(
    redis_client: redis.Redis,
) -> None:
    bind_namespace(redis_client, HUB_A)
    bind_namespace(redis_client, HUB_A)  # the same hub again: fine
    assert namespace_owner(redis_client) == HUB_A


def test_a_namespace_bound_to_another_hub_is_refused_and_left_as_it_is(
    redis_client: redis.Redis,
) -> None:
    bind_namespace(redis_client, HUB_A)
    with pytest.raises(NamespaceOwnedError) as refused:
        bind_namespace(redis_client, HUB_B)
    message = str(refused.value)
    assert HUB_A in message and HUB_B in message and "\n" not in message
    assert "point this consumer at that hub's store" in message
    assert namespace_owner(redis_client) == HUB_A


def test_a_read_only_check_neither_claims_nor_accepts_another_hub(
    redis_client: redis.Redis,
) -> None:
    bind_namespace(redis_client, HUB_A, claim=False)
    assert namespace_owner(redis_client) is None
    redis_client.set(keys.HUB_IDENTITY, HUB_B)
    with pytest.raises(NamespaceOwnedError):
        bind_namespace(redis_client, HUB_A, claim=False)


def test_an_owner_with_control_characters_is_shown_escaped(redis_client: redis.Redis) -> None:
    redis_client.set(keys.HUB_IDENTITY, "evil\x1b[2J\nline")
    with pytest.raises(NamespaceOwnedError) as refused:
        bind_namespace(redis_client, HUB_A)
    assert "\x1b" not in str(refused.value) and "\n" not in str(refused.value)


def test_release_removes_only_the_own_binding(redis_client: redis.Redis) -> None:
    bind_namespace(redis_client, HUB_A)
    assert release_namespace(redis_client, HUB_B) is False
    assert namespace_owner(redis_client) == HUB_A
    assert release_namespace(redis_client, HUB_A) is True
    assert namespace_owner(redis_client) is None
    assert release_namespace(redis_client, HUB_A) is False


# ----- the mark: a store that went back in time -----


def marked_store(commits: int) -> HubStore:
    """A memory store of hub A that has committed ``commits`` ingest batches."""
    store = open_store("memory://", create_schema=True)
    for sequence in range(1, commits + 1):
        store.ingest([event_entry(sync_event(sequence))])
    return store


def test_a_store_at_or_past_the_mark_is_accepted(redis_client: redis.Redis) -> None:
    with marked_store(3) as store:
        hub_id = store.init_hub()
        bind_namespace(redis_client, hub_id, store=store)  # no mark yet: nothing to compare
        redis_client.zadd(keys.HUB_MARK, {hub_id: 3})
        bind_namespace(redis_client, hub_id, store=store)
        redis_client.zadd(keys.HUB_MARK, {hub_id: 2})
        bind_namespace(redis_client, hub_id, store=store)


def test_a_store_behind_the_mark_is_refused_in_one_line(redis_client: redis.Redis) -> None:
    with marked_store(2) as store:
        hub_id = store.init_hub()
        redis_client.zadd(keys.HUB_MARK, {hub_id: 5, HUB_B: 900})
        with pytest.raises(StoreBehindError) as refused:
            bind_namespace(redis_client, hub_id, store=store)
        message = str(refused.value)
        assert "older than this Redis namespace" in message and "\n" not in message
        assert "committed 5" in message and "holds 2" in message and "--accept-restore" in message
        assert isinstance(refused.value, ConfigError)  # exit 2 in the CLI
        bind_namespace(redis_client, hub_id)  # without the store: the owner only


def test_accepting_a_restore_lowers_the_mark_to_the_store(redis_client: redis.Redis) -> None:
    with marked_store(2) as store:
        hub_id = store.init_hub()
        redis_client.zadd(keys.HUB_MARK, {hub_id: 5})
        assert accept_restore(redis_client, hub_id, store) == (5, 2)
        assert namespace_mark(redis_client, hub_id) == 2
        bind_namespace(redis_client, hub_id, store=store)


def test_a_published_mark_only_ever_grows(redis_client: redis.Redis) -> None:
    for mark in (4, 9, 7):
        pub = Publication(consumer="c", hub_id=HUB_A, dead_maxlen=10, alerts_maxlen=10)
        pub.mark = mark
        pub.send(redis_client)
    assert namespace_mark(redis_client, HUB_A) == 9


def test_release_forgets_the_mark_of_the_hub_released(redis_client: redis.Redis) -> None:
    bind_namespace(redis_client, HUB_A)
    redis_client.zadd(keys.HUB_MARK, {HUB_A: 3, HUB_B: 4})
    assert release_namespace(redis_client, HUB_A) is True
    assert namespace_mark(redis_client, HUB_A) is None
    assert namespace_mark(redis_client, HUB_B) == 4
