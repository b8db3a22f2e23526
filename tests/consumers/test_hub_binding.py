"""One hub per Redis namespace: ``bind_namespace`` on real Redis (a second hub's
``hubsync consume``, as real processes, is in ``tests/e2e/test_one_hub_per_namespace.py``)."""

from __future__ import annotations

import pytest
import redis

from consumers.stream.hub_binding import NamespaceOwnedError, bind_namespace, release_namespace
from hubsync.core import keys
from tests.helpers.consumer_support import namespace_owner

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
