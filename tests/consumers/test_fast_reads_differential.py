"""``consumers.stream.fast_reads`` against its reference: the same batch from the same stream.

Generated entries (any names and values, names repeated, empty ones, large ones) are
written to a private redis-server and read by two consumer groups of the same stream,
one through the reference (``read_streams`` and ``stream_entries``: redis-py's mapping
of each entry), one through ``read_group_pairs``; the streams, ids and, through
``fields_of``, every entry's fields must be equal, an entry deleted while pending
included (no fields: redis-py makes it an empty mapping).
"""

from __future__ import annotations

import itertools

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumers.stream.fast_reads import as_reference, fields_of, read_group_pairs
from hubsync.core.redis_values import as_text, stream_entries
from hubsync.core.stream_reads import read_streams

pytestmark = pytest.mark.redis

names = st.binary(max_size=12) | st.sampled_from([b"kind", b"event", b"sig", b"run_id"])
values = st.binary(max_size=40) | st.just(b"x" * 3000)
entries = st.lists(
    st.lists(st.tuples(names, values), min_size=1, max_size=6), min_size=1, max_size=5
)
_numbers = itertools.count()


def _both(client: redis.Redis, streams: dict[str, str], count: int | None) -> tuple[object, object]:
    """What each reader gives for ``streams``, the reference's through group ``ref``, the fast
    one's through group ``fast``, each entry's fields as the reference's mapping."""
    reference = [
        (as_text(stream), stream_entries(got))
        for stream, got in read_streams(
            client, streams, count=count, block_ms=None, group=("ref", "c")
        )
    ]
    fast = [
        (stream, as_reference(got))
        for stream, got in read_group_pairs(
            client, streams, count=count, block_ms=None, group=("fast", "c")
        )
    ]
    return reference, fast


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(entries, entries, st.sampled_from([None, 1, 3, 500]))
def test_the_fast_reader_gives_the_reference_batch(
    redis_client: redis.Redis,
    first: list[list[tuple[bytes, bytes]]],
    second: list[list[tuple[bytes, bytes]]],
    count: int | None,
) -> None:
    number = next(_numbers)
    streams = [f"t{number}:a", f"t{number}:b"]
    written: dict[str, list[bytes]] = {}
    for stream, batch in zip(streams, (first, second), strict=True):
        for pairs in batch:
            flat = [part for pair in pairs for part in pair]
            entry_id = redis_client.execute_command("XADD", stream, "*", *flat)
            written.setdefault(stream, []).append(entry_id)
        for group in ("ref", "fast"):
            redis_client.xgroup_create(stream, group, id="0")
    new = dict.fromkeys(streams, ">")
    while True:
        reference, fast = _both(redis_client, new, count)
        assert fast == reference
        if not reference:
            break
    # an entry deleted while pending: the history read gives its id with no fields
    redis_client.xdel(streams[0], written[streams[0]][0])
    reference, fast = _both(redis_client, dict.fromkeys(streams, "0"), count)
    assert fast == reference
    assert reference[0][1][0] == (as_text(written[streams[0]][0]), {})


def test_a_stream_with_nothing_new_reads_as_nothing(redis_client: redis.Redis) -> None:
    redis_client.xgroup_create("quiet", "fast", id="$", mkstream=True)
    assert (
        read_group_pairs(redis_client, {"quiet": ">"}, count=10, block_ms=None, group=("fast", "c"))
        == []
    )
    assert read_group_pairs(redis_client, {}, count=10, block_ms=None, group=("fast", "c")) == []


def test_a_refused_read_raises_as_the_reference_does(redis_client: redis.Redis) -> None:
    redis_client.set("not-a-stream", "x")
    with pytest.raises(redis.ResponseError):
        read_group_pairs(
            redis_client, {"not-a-stream": ">"}, count=1, block_ms=None, group=("g", "c")
        )
    with pytest.raises(redis.ResponseError, match="NOGROUP"):
        read_group_pairs(redis_client, {"nogroup": ">"}, count=1, block_ms=None, group=("g", "c"))


def test_fields_of_keeps_the_last_value_of_a_repeated_name() -> None:
    assert fields_of([b"a", b"1", b"b", b"2", b"a", b"3"]) == {b"a": b"3", b"b": b"2"}
    mapping = {b"a": b"1"}
    assert fields_of(mapping) is mapping
