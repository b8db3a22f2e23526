"""One read of many streams (XREADGROUP or XREAD), on a single server or a Redis Cluster.

On a single server one command names every stream: one round trip, and its
BLOCK waits on all of them at once. A cluster refuses a command whose keys lie
in more than one hash slot (CROSSSLOT), and every hub project's keys have a
slot of their own (``hubsync:{P}:...``; every runtime's events stream of P
included, so one project's streams are read by one command), so there
``read_streams`` splits the streams by slot and reads them in two steps:

1. every slot group without blocking, in one pipeline: each node gets its
   groups' commands in one round trip, and the nodes are written to before
   any reply is read, so the step costs about one round trip whatever the
   number of nodes;
2. only when all of that came back empty, and the caller would block: one
   blocking read of one slot group, picked at random, for at most
   ``CLUSTER_BLOCK_MS``. An entry arriving on another slot meanwhile waits at
   most that long, plus a round trip, before step 1 of the next call finds it.

Each command goes to its slot's master as redis-py's slot table says
(``target_nodes``): redis-py would otherwise ask a node ``COMMAND GETKEYS``
for every XREAD, which has no fixed key positions. A MOVED reply (a slot that
moved, or a failed-over master) is still followed by redis-py, and a node that
is gone makes it read the slot table again.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from redis.cluster import RedisCluster

from hubsync.core.connections import RedisClient

CLUSTER_BLOCK_MS = 20
"""Longest a cluster read blocks on one slot group while the others are not watched."""

StreamReply = list[Any]
"""What redis-py returns for XREAD/XREADGROUP: ``[[stream, [(id, fields), ...]], ...]``."""


def read_streams(
    client: RedisClient,
    streams: Mapping[str, str],
    *,
    count: int | None,
    block_ms: int | None,
    group: tuple[str, str] | None = None,
) -> StreamReply:
    """Read ``streams`` (key -> last id read, or ``>`` in a group) as one XREAD would.

    ``group`` is ``(group, consumer)`` for XREADGROUP. ``block_ms`` None does not
    block; 0 blocks until an entry comes (on a cluster: in slices of
    ``CLUSTER_BLOCK_MS``, returning empty after one). The reply is redis-py's,
    one ``[stream, entries]`` pair per stream that had entries.
    """
    if not streams:
        return []
    if not isinstance(client, RedisCluster):
        positions: dict[Any, Any] = dict(streams)
        if group is None:
            reply: Any = client.xread(positions, count=count, block=block_ms)
        else:
            reply = client.xreadgroup(*group, positions, count=count, block=block_ms)
        return list(reply or [])
    return _read_cluster(client, streams, _Read(count, block_ms, group))


def slot_groups(client: Any, streams: Mapping[str, str]) -> list[dict[str, str]]:
    """``streams`` split into groups of one hash slot each (a multi-key command's limit).

    ``client`` is a ``RedisCluster`` (whose methods redis-py leaves untyped, hence Any).
    """
    groups: dict[int, dict[str, str]] = {}
    for key, position in streams.items():
        groups.setdefault(client.keyslot(key), {})[key] = position
    return list(groups.values())


@dataclass(frozen=True, slots=True)
class _Read:
    """How one command reads: at most ``count`` entries a stream, blocking ``block_ms`` (None:
    not at all), in ``group`` (``(group, consumer)``: XREADGROUP) or none (XREAD)."""

    count: int | None
    block_ms: int | None
    group: tuple[str, str] | None


def _read_cluster(client: Any, streams: Mapping[str, str], read: _Read) -> StreamReply:
    groups = slot_groups(client, streams)
    if len(groups) == 1:  # one slot: one command, blocking as on a single server
        return _flat([_read_one(client, groups[0], read)])
    pipe = client.pipeline(transaction=False)
    unblocked = replace(read, block_ms=None)
    for one in groups:
        pipe.execute_command(*_command(one, unblocked), target_nodes=_node(client, one))
    found = _flat(pipe.execute())
    if found or read.block_ms is None:
        return found
    block = CLUSTER_BLOCK_MS if read.block_ms == 0 else min(read.block_ms, CLUSTER_BLOCK_MS)
    return _flat([_read_one(client, random.choice(groups), replace(read, block_ms=block))])


def _read_one(client: Any, streams: Mapping[str, str], read: _Read) -> Any:
    return client.execute_command(*_command(streams, read), target_nodes=_node(client, streams))


def _node(client: Any, streams: Mapping[str, str]) -> Any:
    """The master of the slot of ``streams`` (one slot), from redis-py's slot table."""
    return client.get_node_from_key(next(iter(streams)))


def _command(streams: Mapping[str, str], read: _Read) -> list[Any]:
    """The words of XREADGROUP (with a group) or XREAD over ``streams``."""
    words: list[Any] = ["XREADGROUP", "GROUP", *read.group] if read.group is not None else ["XREAD"]
    if read.count is not None:
        words += ["COUNT", read.count]
    if read.block_ms is not None:
        words += ["BLOCK", read.block_ms]
    return [*words, "STREAMS", *streams.keys(), *streams.values()]


def _flat(replies: list[Any]) -> StreamReply:
    """The ``[stream, entries]`` pairs of several replies (None: nothing new) as one reply."""
    return [pair for reply in replies if reply for pair in reply]
