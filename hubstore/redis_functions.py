"""hubsync's Redis Functions library: every Lua function hubsync runs, loaded once per Redis.

Each function lives in ``hubstore/lua/<name>.lua`` and opens with a header naming
every KEYS and ARGV entry and what it returns; its body reads ``KEYS`` and
``ARGV`` as a script would. ``library_source()`` puts them into one library,
``#!lua name=hubsync``: the shared prelude (``lease_common.lua``) once at the
top, then each file as the callback of a function named
``hubsync_v<LIBRARY_VERSION>_<name>`` (a header line ``--! flags no-writes``
makes a read-only one, called with FCALL_RO).

The library is loaded by the hub's setup step (``hubsync hub migrate --redis-url``,
as a Redis user allowed FUNCTION LOAD; on every master of a cluster), by
``hubsync demo`` and by the private servers of the tests. Redis keeps it in its
RDB and AOF. Callers run it with FCALL, so no runtime or consumer needs EVAL,
EVALSHA or SCRIPT LOAD. The version is part of every function's name: a Redis
holding no library, or an older one, answers "Function not found", which
``RedisFunction`` turns into ``FunctionsMissingError``, one line naming the
command that loads the current library.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache
from importlib import resources
from typing import Any

import redis

from hubstore.errors import HubstoreError

LIBRARY_NAME = "hubsync"
LIBRARY_VERSION = 1
"""Raised whenever a function's KEYS, ARGV or reply change (tests/hubstore/test_redis_functions.py
pins the library's digest per version), so a Redis holding an older library answers
"Function not found" rather than run it."""
PRELUDE = "lease_common"
"""The file put once at the top of the library: local helpers every lease function uses."""
LOAD_COMMAND = "hubsync hub migrate --hub-url URL --redis-url REDIS_URL"
_FLAGS = "--! flags "


class FunctionsMissingError(HubstoreError):
    """This Redis has no hubsync functions library of this version; nothing was run."""

    def __init__(self, function: str) -> None:
        super().__init__(
            f"Redis has no function {function} (hubsync's Redis functions, library "
            f"{LIBRARY_NAME!r} version {LIBRARY_VERSION}, are not loaded there or are older): "
            f"load them with `{LOAD_COMMAND}` as a Redis user allowed FUNCTION LOAD"
        )
        self.function = function


def function_name(name: str) -> str:
    """The Redis name of the function of ``hubstore/lua/<name>.lua`` in this version."""
    return f"{LIBRARY_NAME}_v{LIBRARY_VERSION}_{name}"


@cache
def lua_source(name: str) -> str:
    """The text of ``hubstore/lua/<name>.lua``."""
    return resources.files("hubstore").joinpath("lua", f"{name}.lua").read_text("utf-8")


def _read_only(name: str) -> bool:
    return any(
        line.startswith(_FLAGS) and "no-writes" in line.split()
        for line in lua_source(name).splitlines()
    )


def _registration(name: str) -> str:
    flags = "{'no-writes'}" if _read_only(name) else "{}"
    return (
        f"redis.register_function{{function_name = '{function_name(name)}', flags = {flags},\n"
        f"callback = function(KEYS, ARGV)\n{lua_source(name)}\nend}}\n"
    )


@dataclass(frozen=True)
class RedisFunction:
    """One function of the library on one client: call it as ``f(keys=[...], args=[...])``."""

    client: Any
    name: str
    read_only: bool

    @property
    def redis_name(self) -> str:
        """The name FCALL calls it by."""
        return function_name(self.name)

    def __call__(self, *, keys: list[str], args: list[Any]) -> Any:
        call = self.client.fcall_ro if self.read_only else self.client.fcall
        try:
            return call(self.redis_name, len(keys), *keys, *args)
        except redis.ResponseError as exc:
            raise missing_function_error(exc, self.redis_name) from None

    def queue(self, pipe: Any, keys: list[str], args: list[Any]) -> None:
        """Put the call on ``pipe`` (its reply comes with the pipeline's)."""
        call = pipe.fcall_ro if self.read_only else pipe.fcall
        call(self.redis_name, len(keys), *keys, *args)


def missing_function_error(exc: redis.ResponseError, name: str) -> Exception:
    """``FunctionsMissingError`` when Redis does not know the function, else ``exc`` itself."""
    if "function not found" in str(exc).lower():
        return FunctionsMissingError(name)
    return exc


@dataclass(frozen=True)
class RedisFunctions:
    """Every function of the library on one client; each field is named after its ``.lua`` file."""

    lease_acquire: RedisFunction
    lease_renew: RedisFunction
    lease_release: RedisFunction
    lease_check: RedisFunction
    fenced_write: RedisFunction
    lease_migrate: RedisFunction
    stream_trim_acked: RedisFunction
    stream_remove_idle_consumer: RedisFunction
    dead_replay: RedisFunction
    hub_release: RedisFunction
    library_version: RedisFunction


def function_files() -> tuple[str, ...]:
    """The names of the library's functions, in the order they are registered."""
    return tuple(f.name for f in fields(RedisFunctions))


def functions_for(client: Any) -> RedisFunctions:
    """The library's functions called through ``client`` (no round trip until one is called)."""
    return RedisFunctions(
        **{name: RedisFunction(client, name, _read_only(name)) for name in function_files()}
    )


@cache
def library_source() -> str:
    """The whole library as FUNCTION LOAD takes it."""
    parts = [f"#!lua name={LIBRARY_NAME}\n", lua_source(PRELUDE)]
    parts += [_registration(name) for name in function_files()]
    return "\n".join(parts)


def load_library(client: Any) -> None:
    """FUNCTION LOAD REPLACE the library: on the server, or on every master of a cluster
    (replicas get it from their master). Running it again changes nothing."""
    client.function_load(library_source(), replace=True)


def require_library(client: Any) -> None:
    """Raise ``FunctionsMissingError`` unless this version of the library answers here (one
    keyless FCALL_RO: any user allowed FCALL_RO may ask)."""
    functions_for(client).library_version(keys=[], args=[])


def library_loaded(client: Any) -> bool:
    """Whether the server (every master of a cluster) holds this version of the library."""
    expected = {function_name(name) for name in function_files()}
    replies = client.function_list(library=LIBRARY_NAME)
    per_node = replies.values() if isinstance(replies, dict) else [replies]
    return all(expected <= _function_names(reply) for reply in per_node)


def _function_names(reply: Any) -> set[str]:
    names: set[str] = set()
    for library in reply or []:
        info = _pairs(library)
        for function in info.get("functions", []):
            names.add(_text(_pairs(function).get("name", b"")))
    return names


def _pairs(flat: Any) -> dict[str, Any]:
    if isinstance(flat, dict):
        return {_text(k): v for k, v in flat.items()}
    return {_text(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
