"""The one registry of hubsync's Lua scripts: every script is registered through it.

Each script lives in ``hubstore/lua/<name>.lua`` and opens with a header naming
every KEYS and ARGV entry and what it returns. ``scripts_for(client)`` registers
all of them on a client once (no round trip); each ``Script`` calls EVALSHA and,
on NOSCRIPT (after a Redis restart or ``SCRIPT FLUSH``), loads the source and
retries, so callers never see the script cache.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, fields
from functools import cache
from importlib import resources
from typing import Any

from redis.commands.core import Script

INCLUDE = "--! include "
"""A line ``--! include NAME`` is replaced by ``hubstore/lua/NAME.lua`` (shared preludes:
EVAL scripts cannot import one another, and copies of the same checks would drift)."""


@cache
def lua_source(name: str) -> str:
    """The source of ``hubstore/lua/<name>.lua`` with its includes in place, read once."""
    text = resources.files("hubstore").joinpath("lua", f"{name}.lua").read_text("utf-8")
    return "".join(
        lua_source(line[len(INCLUDE) :].strip()) if line.startswith(INCLUDE) else line
        for line in text.splitlines(keepends=True)
    )


@dataclass(frozen=True)
class RedisScripts:
    """Every script registered on one client; each field is named after its ``.lua`` file."""

    lease_acquire: Script
    lease_renew: Script
    lease_release: Script
    lease_check: Script
    fenced_write: Script
    stream_trim_acked: Script
    stream_remove_idle_consumer: Script
    dead_replay: Script
    hub_release: Script

    @classmethod
    def register(cls, client: Any) -> RedisScripts:
        """Register every script on ``client`` (no round trip until first use)."""
        return cls(**{f.name: client.register_script(lua_source(f.name)) for f in fields(cls)})


_registered: weakref.WeakKeyDictionary[Any, RedisScripts] = weakref.WeakKeyDictionary()
_registered_lock = threading.Lock()


def scripts_for(client: Any) -> RedisScripts:
    """The scripts registered on ``client``, registering them on first use of that client."""
    with _registered_lock:
        scripts = _registered.get(client)
        if scripts is None:
            scripts = _registered[client] = RedisScripts.register(client)
        return scripts
