"""A private redis-server that requires a password, and the password file daemons read it from."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from hubsync.demo.embedded_redis import RedisServerProcess

PASSWORD = "s3cret-Redis-pass-7f1c"


@contextmanager
def requiring_password(server: RedisServerProcess) -> Iterator[str]:
    """``server`` requiring ``PASSWORD`` (``requirepass``); yields its URL without password.

    A password is never registered for a URL process-wide (each ``RedisTarget`` carries its
    own), so nothing is left to undo but the server's own setting, which the server's
    fixture ends with it.
    """
    admin = redis.Redis.from_url(server.url)
    admin.config_set("requirepass", PASSWORD)
    admin.close()
    yield server.url


def write_password_file(directory: Path) -> Path:
    """A 0600 file in ``directory`` holding ``PASSWORD`` between blanks, as an operator's might."""
    path = directory / "redis-password"
    path.write_text(f"  {PASSWORD}\n")
    path.chmod(0o600)
    return path


def cmdline(pid: int) -> bytes:
    """The command line of process ``pid`` as ps shows it to every user."""
    return Path(f"/proc/{pid}/cmdline").read_bytes()
