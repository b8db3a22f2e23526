"""Redis replies made plain: ``as_text`` for bytes-or-str, ``stream_entries`` for entry lists."""

from __future__ import annotations

import redis

from hubsync.core.redis_values import (
    as_text,
    entry_id_ms,
    entry_id_order,
    redis_now_ms,
    stream_entries,
    time_reply_ms,
)


def test_bytes_are_decoded_as_utf8_and_str_passes_through() -> None:
    assert as_text(b"hub") == "hub"
    assert as_text("h\u00e9") == "h\u00e9"
    assert as_text("h\u00e9".encode()) == "h\u00e9"


def test_invalid_utf8_becomes_a_replacement_character_not_an_error() -> None:
    assert as_text(b"bad\xffbyte") == "bad\ufffdbyte"


def test_other_values_are_their_str() -> None:
    assert as_text(7) == "7"
    assert as_text(None) == "None"


def test_stream_entries_give_text_ids_and_keep_fields_as_they_are() -> None:
    fields = {b"kind": b"event"}
    assert stream_entries([(b"1-0", fields), ("2-5", {})]) == [("1-0", fields), ("2-5", {})]
    assert stream_entries(None) == []


def test_an_entry_without_fields_keeps_its_id_with_none() -> None:
    assert stream_entries([(b"3-0", None), (b"4-0", [])]) == [("3-0", None), ("4-0", None)]


def test_a_real_xreadgroup_reply_becomes_text_ids_with_field_dicts(
    redis_client: redis.Redis,
) -> None:
    stream = "hubsync:values-test:events"
    first = redis_client.xadd(stream, {"kind": "event"})
    second = redis_client.xadd(stream, {"kind": "presence"})
    redis_client.xgroup_create(stream, "hub", id="0")
    [(_, raw)] = redis_client.xreadgroup("hub", "c1", {stream: ">"})
    assert stream_entries(raw) == [
        (first.decode(), {b"kind": b"event"}),
        (second.decode(), {b"kind": b"presence"}),
    ]


def test_a_time_reply_becomes_whole_milliseconds() -> None:
    assert time_reply_ms((1_700_000_000, 999_999)) == 1_700_000_000_999
    assert time_reply_ms((b"12", b"3456")) == 12_003


def test_redis_now_is_the_servers_clock_in_milliseconds(redis_client: redis.Redis) -> None:
    seconds, micros = redis_client.time()
    assert 0 <= redis_now_ms(redis_client) - (seconds * 1000 + micros // 1000) < 1_000


def test_an_entry_id_gives_its_millisecond_part() -> None:
    assert entry_id_ms(b"1700000000123-7") == 1_700_000_000_123
    assert entry_id_ms("42-0") == 42


def test_entry_ids_order_by_milliseconds_then_sequence_not_as_text() -> None:
    assert entry_id_order(b"9-5") < entry_id_order("10-0")  # as text "10-0" < "9-5"
    assert entry_id_order("10-2") < entry_id_order("10-11")
    assert entry_id_order("7") == (7, 0)
