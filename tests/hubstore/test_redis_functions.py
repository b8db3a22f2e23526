"""hubsync's Redis Functions library: every Lua file is one function of it, loaded once per Redis."""

from __future__ import annotations

import hashlib
from dataclasses import fields
from importlib import resources

import pytest
import redis

from hubstore.leases import LeaseClient
from hubstore.redis_functions import (
    LIBRARY_VERSION,
    PRELUDE,
    FunctionsMissingError,
    RedisFunctions,
    function_name,
    functions_for,
    library_loaded,
    library_source,
    load_library,
    lua_source,
    require_library,
)
from hubsync.core import keys

LIBRARY_DIGESTS = {1: "a768261ed6fd934cc5b62a17b2d962a74971e27657858efc937bca690b0c5e49"}
"""sha256 of ``library_source()`` per LIBRARY_VERSION. A change to any function changes the
digest: raise LIBRARY_VERSION with it (so an older library on a Redis is never run by newer
code) and add the new digest here."""


def _function_files() -> set[str]:
    lua_dir = resources.files("hubstore").joinpath("lua")
    return {entry.name.removesuffix(".lua") for entry in lua_dir.iterdir()} - {PRELUDE}


def test_every_lua_file_is_a_function_of_the_library_and_nothing_else() -> None:
    assert {f.name for f in fields(RedisFunctions)} == _function_files()


def test_every_function_opens_with_a_keys_and_argv_header() -> None:
    for name in _function_files():
        header = lua_source(name).split("\n\n", 1)[0]
        assert header.startswith(f"-- {name}.lua:"), name
        assert "KEYS[1]" in header or "KEYS  none" in header, name
        assert "ARGV" in header, name


def test_the_library_version_changes_with_its_source() -> None:
    digest = hashlib.sha256(library_source().encode()).hexdigest()
    assert LIBRARY_DIGESTS.get(LIBRARY_VERSION) == digest, (
        f"the library changed: raise LIBRARY_VERSION and pin {digest} for it"
    )


def test_a_redis_without_the_library_says_in_one_line_how_to_load_it(
    redis_client: redis.Redis,
) -> None:
    redis_client.function_flush()
    assert not library_loaded(redis_client)
    with pytest.raises(FunctionsMissingError):
        require_library(redis_client)
    with pytest.raises(FunctionsMissingError) as info:
        LeaseClient(redis_client).acquire("r", "box-a", 30_000)
    message = str(info.value)
    assert "\n" not in message
    assert "hubsync hub migrate" in message and "--redis-url" in message
    assert function_name("lease_acquire") in message
    load_library(redis_client)
    assert library_loaded(redis_client)
    require_library(redis_client)
    assert LeaseClient(redis_client).acquire("r", "box-a", 30_000).ok


def test_an_older_library_counts_as_missing(redis_client: redis.Redis) -> None:
    older = library_source().replace(f"_v{LIBRARY_VERSION}_", f"_v{LIBRARY_VERSION - 1}_")
    redis_client.function_load(older, replace=True)
    assert not library_loaded(redis_client)
    with pytest.raises(FunctionsMissingError):
        functions_for(redis_client).stream_trim_acked(
            keys=[keys.events_stream("alpha")], args=[keys.CONSUMER_GROUP]
        )
    load_library(redis_client)  # REPLACE: the older functions go with it
    assert library_loaded(redis_client)
    listed = redis_client.function_list(library="hubsync")
    assert f"_v{LIBRARY_VERSION - 1}_".encode() not in repr(listed).encode()


def test_the_library_survives_a_flushall_and_loading_it_again_changes_nothing(
    redis_client: redis.Redis,
) -> None:
    redis_client.flushall()
    trim = functions_for(redis_client).stream_trim_acked
    assert trim(keys=[keys.events_stream("alpha")], args=[keys.CONSUMER_GROUP]) == [0, b""]
    load_library(redis_client)
    load_library(redis_client)
    assert library_loaded(redis_client)
