"""Values as redis-py returns them, made into plain Python: text, stream entries, times.

A client made without ``decode_responses`` (every client hubsync builds, since
event bytes must stay bytes) answers names, ids and statuses as ``bytes``; one
made with it, or a test double, answers ``str``. These helpers accept both, so
no caller needs to know which client it was given.

Times read from Redis are whole milliseconds (names end in ``_ms``), the unit
of its ``TIME``-derived clocks, stream entry ids and ``PX``/``PTTL``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import Any

from hubsync.core.connections import RedisClient

RawEntry = tuple[str, dict[bytes, bytes] | None]
"""``(entry id, raw fields)``; fields are None for an entry deleted from the stream."""


def as_text(value: object) -> str:
    """``bytes`` decoded as UTF-8 (an invalid byte becomes U+FFFD, never an error); else ``str``."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


_UNPRINTABLE_EXTRA = frozenset("\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""Beyond the control characters: line and paragraph separators, and the bidi
overrides that make a terminal show text in another order than it is."""


def is_unprintable(char: str) -> bool:
    """Whether ``char`` may move a terminal's cursor, colour or order, or start a new line."""
    return unicodedata.category(char) == "Cc" or char in _UNPRINTABLE_EXTRA


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(value: object) -> str:
    """``value`` (bytes or text) as one line safe to print: control characters escaped.

    Anything that came off Redis goes through this before a terminal or a text
    log shows it: an ESC byte would drive the terminal, a newline would forge a
    line of its own. ``\\x1b``, ``\\n``, ``\\u202e`` are shown instead; printable
    text, non-ASCII letters included, is left as it is.
    """
    text = as_text(value)
    if text.isprintable():  # the common case: nothing to do
        return text
    return "".join(_escaped(char) if is_unprintable(char) else char for char in text)


def stream_entries(raw: Iterable[Any] | None) -> list[RawEntry]:
    """XREAD/XREADGROUP/XCLAIM/XAUTOCLAIM entries as ``(id text, fields or None)``.

    Fields that are not a mapping (``None``: an entry deleted while pending,
    as XCLAIM on Redis before 7 returns it) become ``None``; the entry is kept
    so that the caller can still acknowledge its id.
    """
    return [
        (as_text(entry_id), fields if isinstance(fields, dict) else None)
        for entry_id, fields in raw or ()
    ]


def time_reply_ms(reply: Any) -> int:
    """A ``TIME`` reply ``(seconds, microseconds)`` as whole milliseconds."""
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


def redis_now_ms(client: RedisClient) -> int:
    """Redis's own clock in milliseconds (``TIME``): the clock stream ids and ages use."""
    return time_reply_ms(client.time())


def entry_id_ms(entry_id: object) -> int:
    """The millisecond timestamp part of a stream entry id (``<ms>-<seq>``)."""
    return int(as_text(entry_id).partition("-")[0])


def entry_id_order(entry_id: object) -> tuple[int, int]:
    """``(milliseconds, sequence)`` of a stream entry id: compares as the stream orders ids."""
    millis, _, sequence = as_text(entry_id).partition("-")
    return int(millis), int(sequence or 0)
