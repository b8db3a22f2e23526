"""The Lua scripts under ``hubstore/lua/``, registered once per Redis client.

``register_script`` returns a ``Script`` that calls EVALSHA and, on NOSCRIPT
(after a Redis restart or ``SCRIPT FLUSH``), loads the source and retries, so
callers never see the script cache.
"""

from __future__ import annotations

from dataclasses import dataclass
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
class LeaseScripts:
    """The lease scripts registered on one client."""

    acquire: Script
    renew: Script
    release: Script
    check: Script
    fenced_write: Script

    @classmethod
    def register(cls, redis: Any) -> LeaseScripts:
        """Register every lease script on ``redis`` (no round trip until first use)."""
        return cls(
            acquire=redis.register_script(lua_source("lease_acquire")),
            renew=redis.register_script(lua_source("lease_renew")),
            release=redis.register_script(lua_source("lease_release")),
            check=redis.register_script(lua_source("lease_check")),
            fenced_write=redis.register_script(lua_source("fenced_write")),
        )
