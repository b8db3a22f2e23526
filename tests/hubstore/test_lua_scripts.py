"""The Lua registry: every script in hubstore/lua is registered once per client and survives a flush."""

from __future__ import annotations

from dataclasses import fields
from importlib import resources

import redis

from hubstore.lua_scripts import RedisScripts, lua_source, scripts_for
from hubsync.core import keys

INCLUDES = {"lease_common"}
"""Preludes pasted into other scripts, never run alone."""


def _script_files() -> set[str]:
    lua_dir = resources.files("hubstore").joinpath("lua")
    return {entry.name.removesuffix(".lua") for entry in lua_dir.iterdir()} - INCLUDES


def test_every_lua_file_is_in_the_registry_and_nothing_else() -> None:
    assert {f.name for f in fields(RedisScripts)} == _script_files()


def test_every_script_opens_with_a_keys_and_argv_header() -> None:
    for name in _script_files():
        header = lua_source(name).split("\n\n", 1)[0]
        assert header.startswith(f"-- {name}.lua:"), name
        assert "KEYS[1]" in header, name


def test_scripts_are_registered_once_per_client(redis_url: str) -> None:
    first, second = redis.Redis.from_url(redis_url), redis.Redis.from_url(redis_url)
    try:
        assert scripts_for(first) is scripts_for(first)
        assert scripts_for(first) is not scripts_for(second)
    finally:
        first.close()
        second.close()


def test_a_registered_script_reloads_itself_after_script_flush(redis_client: redis.Redis) -> None:
    stream = keys.events_stream("alpha", "rt-1")
    trim = scripts_for(redis_client).stream_trim_acked
    assert trim(keys=[stream], args=[keys.CONSUMER_GROUP]) == [0, b""]
    redis_client.script_flush()
    assert not redis_client.script_exists(trim.sha)[0]
    assert trim(keys=[stream], args=[keys.CONSUMER_GROUP]) == [0, b""]
    assert redis_client.script_exists(trim.sha)[0]
