"""The stream-maintenance Lua scripts the consumers run, registered once per Redis client."""

from __future__ import annotations

from dataclasses import dataclass

import redis
from redis.commands.core import Script

from hubstore.lua_scripts import lua_source


@dataclass(frozen=True)
class StreamScripts:
    """``stream_trim_acked.lua`` and ``stream_remove_idle_consumer.lua`` on one client."""

    trim_acked: Script
    remove_idle_consumer: Script

    @classmethod
    def register(cls, client: redis.Redis) -> StreamScripts:
        """Register both scripts on ``client`` (EVALSHA, reloaded on NOSCRIPT)."""
        return cls(
            trim_acked=client.register_script(lua_source("stream_trim_acked")),
            remove_idle_consumer=client.register_script(lua_source("stream_remove_idle_consumer")),
        )
