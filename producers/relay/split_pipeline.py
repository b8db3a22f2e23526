"""A pipelined batch whose commands are written now and whose replies are read later.

The sender prepares its next batch (reads the rows, builds and signs the
entries) while Redis works through the one it has just written, instead of
waiting for the replies first: ``write_commands`` packs and writes the whole
batch on a connection of the client's pool, ``WrittenCommands.read_replies``
reads every reply afterwards on that same connection. Nothing counts as sent
before ``read_replies`` returned, so the relay's rules (mark a row attempted
only once its XADD succeeded; retry the whole batch on an error) are those of
``Pipeline.execute``.

* An error reply is raised after every reply was read, so the connection stays
  in step and goes back to the pool.
* A connection error or timeout (a connection left over from before a Redis
  restart fails once on first use) drops the connection and sends the batch
  once more through an ordinary pipeline, with its retries, as redis-py's own
  pipeline would: commands of the first attempt may have been applied, and the
  hub answers ``duplicate`` for an entry it sees twice.
* The batch is packed by hiredis's ``pack_command`` (C) when it is there, as
  ``redis[hiredis]`` installs it: redis-py's ``pack_commands`` spends about
  4 us more per XADD in Python, re-chunking what hiredis packed.
* A Redis Cluster client's pipeline splits a batch by node over several
  connections, so there ``write_commands`` runs the batch whole through its
  pipeline and ``read_replies`` has nothing left to do: same order, same
  outcome, without the overlap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

import redis
from redis.cluster import RedisCluster

from hubsync.core.connections import RedisClient

Command = tuple[str | bytes, ...]
"""One command's arguments, its name first."""

_pack_command: Callable[[Command], bytes] | None
try:
    import hiredis

    _pack_command = cast("Callable[[Command], bytes]", hiredis.pack_command)
except ImportError:  # redis-py without hiredis: its own packer
    _pack_command = None


class WrittenCommands:
    """A batch written to Redis whose replies are still to be read (see the module docstring)."""

    def __init__(self, client: RedisClient, commands: Sequence[Command]) -> None:
        self._client = client
        self._commands = commands
        self._connection: redis.connection.Connection | None = None
        if isinstance(client, RedisCluster):
            _execute(client, commands)
            return
        pool = client.connection_pool
        connection = pool.get_connection()
        try:
            connection.send_packed_command(_packed(connection, commands))  # type: ignore[no-untyped-call]
        except (redis.ConnectionError, redis.TimeoutError):
            _drop(pool, connection)
            _execute(client, commands)
            return
        except BaseException:
            _drop(pool, connection)
            raise
        self._connection = connection

    def read_replies(self) -> None:
        """Read every reply; raise the first error reply, or what a retry raised."""
        connection, self._connection = self._connection, None
        if connection is None:
            return  # the batch was answered when written
        assert isinstance(self._client, redis.Redis)
        pool = self._client.connection_pool
        first_error: redis.ResponseError | None = None
        try:
            for _ in self._commands:
                try:
                    connection.read_response()
                except redis.ResponseError as exc:
                    first_error = first_error or exc
        except (redis.ConnectionError, redis.TimeoutError):
            _drop(pool, connection)
            _execute(self._client, self._commands)
            return
        except BaseException:
            _drop(pool, connection)  # replies left unread: the connection is out of step
            raise
        pool.release(connection)
        if first_error is not None:
            raise first_error

    def abandon(self) -> None:
        """Give the connection back without reading the replies (the batch counts as not sent)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            assert isinstance(self._client, redis.Redis)
            _drop(self._client.connection_pool, connection)


def _packed(connection: redis.connection.Connection, commands: Sequence[Command]) -> list[bytes]:
    """The batch in Redis's protocol, as ``send_packed_command`` takes it (a list of buffers)."""
    if _pack_command is None:
        return connection.pack_commands(commands)  # type: ignore[no-untyped-call,no-any-return]
    return [b"".join(map(_pack_command, commands))]


def _drop(pool: redis.ConnectionPool, connection: redis.connection.Connection) -> None:
    """Close ``connection`` (its replies may be unread) and give it back to ``pool``."""
    connection.disconnect()  # type: ignore[no-untyped-call]
    pool.release(connection)


def _execute(client: RedisClient, commands: Sequence[Command]) -> None:
    pipe = client.pipeline(transaction=False)
    for command in commands:
        pipe.execute_command(*command)
    pipe.execute()
