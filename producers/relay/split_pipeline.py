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
* On a Redis Cluster, a batch whose commands all name one key (the relay's:
  one stream, so one slot) goes the single-server way to the master the
  client's slot table names for it, on that node's own pool: packed by
  hiredis, its replies read later. Should that node answer that the slot is
  not (or no longer) its own (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: nothing was
  written there), or be unreachable (a master failed over), the batch goes
  again whole through the cluster client's pipeline, which follows the
  redirection and refreshes its table. A batch naming several keys goes
  through that pipeline at once, and ``read_replies`` then has nothing left
  to do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

import redis
from redis.cluster import RedisCluster
from redis.exceptions import AskError, ClusterDownError, TryAgainError

from hubsync.core.connections import RedisClient, master_of

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
        self._client = client  # where the batch goes again, whole, should the fast way fail
        self._commands = commands
        self._connection: redis.connection.Connection | None = None
        target = _single_server(client, commands)
        if target is None:
            _execute(client, commands)
            return
        self._pool = pool = target.connection_pool
        try:
            connection = pool.get_connection()
        except (redis.ConnectionError, redis.TimeoutError):
            if not isinstance(client, RedisCluster):
                raise  # one server: unreachable, an outage
            _execute(client, commands)  # its pipeline finds the slot's new master
            return
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
        pool = self._pool
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
        if isinstance(first_error, _NOT_THIS_NODE) and isinstance(self._client, RedisCluster):
            _execute(self._client, self._commands)  # the cluster's pipeline follows the slot
            return
        if first_error is not None:
            raise first_error

    def abandon(self) -> None:
        """Give the connection back without reading the replies (the batch counts as not sent)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            _drop(self._pool, connection)


_NOT_THIS_NODE = (AskError, TryAgainError, ClusterDownError)
"""A cluster node's answers that the command's slot is not served there now (``MovedError``
is an ``AskError``): nothing was written, and the cluster's pipeline knows where to go."""


def _single_server(client: RedisClient, commands: Sequence[Command]) -> redis.Redis | None:
    """The one server the batch goes to the fast way: the client itself, or on a cluster the
    master serving the batch's one key (None when the commands name several keys)."""
    if not isinstance(client, RedisCluster):
        return client
    keys = {command[1] for command in commands}
    if len(keys) != 1:
        return None
    return master_of(client, keys.pop())[0]


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
