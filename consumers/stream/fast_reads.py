"""The consumer's fast read: XREADGROUP's reply as the parser read it, fenced beside the reference.

The reference is ``hubsync.core.stream_reads.read_streams`` with
``hubsync.core.redis_values.stream_entries``: redis-py parses the reply and makes a
``dict`` of each entry's fields (``pairs_to_dict``), which every later step reads by name.
On a single server the consumer reads the same command without that step: each entry
keeps its fields as the flat list of names and values the reply holds, and the fast
path reads a genuine entry off it by position
(``consumers.stream.fast_event_check.FastEventCheck.prove_pairs``). Only an entry that
path does not prove is made into the mapping the reference would have made
(``fields_of``), for the general path.

The guarantee: ``read_group_pairs`` returns the reference's batch but for the fields'
form: the same streams (as text), in the same order, the same entry ids (as text), and
for each entry either None (deleted while pending) or a list whose ``fields_of`` is the
reference's mapping. ``tests/consumers/test_fast_reads_differential.py`` reads generated
entries both ways from a private redis-server and compares them.

A Redis Cluster client keeps the reference (its reads go slot by slot,
``read_streams``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import redis

from hubsync.core.redis_values import RawEntry, as_text

PairsEntry = tuple[str, list[bytes]]
"""``(entry id, fields as names and values alternating)``; an entry deleted from the stream
while pending has none (the reference's empty mapping)."""

EntryFields = Mapping[bytes, bytes] | list[bytes]
"""An entry's fields as either reader gives them: the reference's mapping or the pairs."""

_XREADGROUP = b"XREADGROUP"
"""The command's name as bytes: redis-py looks a reply's callback up by the command's str
name, so under this one it hands the reply back as its parser (hiredis's ``Reader``, or
its own) read it, with its connection handling, retries and error replies unchanged."""


def read_group_pairs(
    client: redis.Redis,
    streams: Mapping[str, str],
    *,
    count: int | None,
    block_ms: int | None,
    group: tuple[str, str],
) -> list[tuple[str, list[PairsEntry]]]:
    """``read_streams`` of ``streams`` for ``group`` (group, consumer) on a single server,
    each entry's fields left as the reply's pairs (see the module)."""
    if not streams:
        return []
    command: list[Any] = [_XREADGROUP, "GROUP", *group]
    if count is not None:
        command += ["COUNT", count]
    if block_ms is not None:
        command += ["BLOCK", block_ms]
    command += ["STREAMS", *streams, *streams.values()]
    reply: Any = client.execute_command(*command)  # type: ignore[no-untyped-call]
    if not reply:
        return []
    if isinstance(reply, dict):  # RESP3 answers a map of stream to entries
        reply = list(reply.items())
    return [
        (
            as_text(stream),
            [
                (as_text(entry_id), pairs if isinstance(pairs, list) else [])
                for entry_id, pairs in entries or ()
            ],
        )
        for stream, entries in reply
    ]


def fields_of(fields: EntryFields) -> Mapping[bytes, bytes]:
    """The mapping the reference reader makes of an entry's fields (a repeated name keeps its
    last value, as redis-py's ``pairs_to_dict``); a mapping as it is."""
    if not isinstance(fields, list):
        return fields
    names = iter(fields)
    return dict(zip(names, names, strict=False))


def as_reference(entries: Sequence[PairsEntry | RawEntry]) -> list[RawEntry]:
    """``entries`` as the reference reader gives them (each field list made a ``dict``)."""
    return [(entry_id, None if raw is None else dict(fields_of(raw))) for entry_id, raw in entries]
