"""A private Redis for the demo and the tests: never the machine's own on 6379.

``RedisServerProcess`` runs ``redis-server`` on a free loopback port in its own
directory (optionally with AOF, so a restart keeps the data), loads hubsync's
functions library on it, and can stop, kill -9 and restart it on the same port. ``FakeRedisTcpServer`` is the fallback
for machines without the binary: fakeredis speaking RESP over TCP, in-process. fakeredis (with
lupa, for the Lua of hubsync's functions) is the ``demo`` extra, not a dependency of hubsync.
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, Self

import redis

from hubstore.redis_functions import load_library
from hubsync.core.closing import ClosesOnExit
from hubsync.core.connections import RedisTarget, Role, connect
from hubsync.core.errors import HubsyncError


class EmbeddedRedisError(HubsyncError):
    """The private Redis could not be started."""


class EmbeddedRedis(Protocol):
    """What the demo needs of a private Redis."""

    @property
    def url(self) -> str: ...

    def stop(self) -> None: ...


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


DEMO_EXTRA = "pip install 'hubsync[demo]'"
"""What installs the fallback Redis: fakeredis, with lupa for its Lua."""


def fakeredis_missing() -> list[str]:
    """The modules of the ``demo`` extra that are not installed (none: fakeredis can start)."""
    return [name for name in ("fakeredis", "lupa") if importlib.util.find_spec(name) is None]


def redis_server_binary() -> str | None:
    """Path of ``redis-server``, or None when this machine has none."""
    return shutil.which("redis-server")


class RedisServerProcess(ClosesOnExit):
    """A ``redis-server`` child process on a private port and directory."""

    def __init__(
        self,
        directory: Path | None = None,
        port: int | None = None,
        appendonly: bool = False,
        binary: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        """``extra_args`` go after the defaults on the command line (a cluster node's flags)."""
        self.binary = binary or redis_server_binary()
        if self.binary is None:
            raise EmbeddedRedisError(
                "redis-server is not installed (apt-get install -y redis-server)"
            )
        self._owns_directory = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="hubsync-redis-"))
        self.port = port or free_port()
        self.appendonly = appendonly
        self.extra_args = tuple(extra_args)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> Self:
        """Start the server and wait until it answers PING (loading counts as not yet)."""
        args = [
            str(self.binary),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", "everysec",
            "--protected-mode", "yes",
            "--daemonize", "no",
            "--logfile", str(self.directory / "redis.log"),
            *self.extra_args,
        ]  # fmt: skip
        self.process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        client = connect(
            RedisTarget(self.url), Role.PROBE, cluster=False
        )  # this server, even a cluster node
        started = False
        try:
            while True:
                if self.process.poll() is not None:
                    raise EmbeddedRedisError(
                        f"redis-server exited with {self.process.returncode}; "
                        f"see {self.directory / 'redis.log'}"
                    )
                try:
                    if client.ping():
                        # as the hub's setup step would; a replica has its master's
                        with contextlib.suppress(redis.ReadOnlyError):
                            load_library(client)
                        started = True
                        return self
                except (redis.ConnectionError, redis.BusyLoadingError, redis.TimeoutError):
                    pass
                if time.monotonic() > deadline:
                    raise EmbeddedRedisError(f"redis-server did not answer within {timeout}s")
                time.sleep(0.02)
        finally:
            client.close()
            if not started:  # a timeout, or a signal while waiting: leave no server behind
                self.kill()

    def stop(self) -> None:
        """Stop gracefully (AOF is flushed); the directory stays for a restart."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def kill(self) -> None:
        """kill -9 the server, as a crash would."""
        if self.process is None:
            return
        self.process.kill()  # Popen's: no signal once it is reaped (its pid may be reused)
        self.process.wait()
        self.process = None

    def restart(self) -> None:
        """Stop and start again on the same port and directory."""
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop and remove the directory if this object created it."""
        self.stop()
        if self._owns_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start() if self.process is None else self


class FakeRedisTcpServer:
    """fakeredis behind a real TCP socket, in a background thread."""

    def __init__(self, port: int | None = None) -> None:
        from fakeredis import TcpFakeServer

        self.port = port or free_port()
        self._server = TcpFakeServer(("127.0.0.1", self.port), server_type="redis")
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fakeredis-tcp", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()


def start_embedded_redis(appendonly: bool = True) -> EmbeddedRedis:
    """A private redis-server when the binary exists, otherwise fakeredis over TCP."""
    if redis_server_binary() is not None:
        return start_redis_server(appendonly)
    return FakeRedisTcpServer()


def start_redis_server(appendonly: bool = True) -> EmbeddedRedis:
    """A private redis-server in a temp directory that ``stop`` removes with the server."""
    server = RedisServerProcess(appendonly=appendonly)
    try:
        server.start()
    except BaseException:
        shutil.rmtree(server.directory, ignore_errors=True)
        raise
    return _CleaningUp(server)


class _CleaningUp:
    """Adapts ``RedisServerProcess`` so ``stop`` also removes its temp directory."""

    def __init__(self, server: RedisServerProcess) -> None:
        self.server = server

    @property
    def url(self) -> str:
        return self.server.url

    def stop(self) -> None:
        self.server.close()
