"""What the signature check costs the consumer per event, and signing the relay.

Times ``verify_event_entry`` on an entry as a consumer reads it (bytes
values), with one key and with two (a rotation's grace period), and
``sign_event_entry`` on the fields a relay sends: best of interleaved rounds
of ``number`` calls, in microseconds. ``scripts/bench_signing.py`` compares
the same calls with a one-shot ``hmac.digest`` and other encodings.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from hubsync.benchmarks.workload import entries
from hubsync.core.entries import decode_fields
from hubsync.core.signing import SIGNATURE_FIELD, RuntimeKey, sign_event_entry, verify_event_entry

TARGET_VERIFY_US = 3.0
"""The most a consumer may spend checking one event's signature."""


def _as_bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def _best_us(action: Callable[[], object], number: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(number):
            action()
        best = min(best, (time.perf_counter() - started) / number)
    return round(best * 1e6, 3)


def measure_signing(number: int = 20_000, rounds: int = 5) -> dict[str, Any]:
    """Microseconds to sign one event entry and to verify it under one and two keys."""
    key, previous = RuntimeKey.generate(), RuntimeKey.generate()
    fields = entries(1, runtimes=1)[0]
    fields[SIGNATURE_FIELD] = sign_event_entry(key, fields)
    # bytes values, as XREADGROUP returns them
    read = decode_fields({name.encode(): _as_bytes(value) for name, value in fields.items()})
    if (
        verify_event_entry([key], read) is not key
        or verify_event_entry([previous, key], read) is not key
    ):
        raise ValueError("the bench entry does not verify")
    verify_1 = _best_us(lambda: verify_event_entry([key], read), number, rounds)
    verify_2 = _best_us(lambda: verify_event_entry([previous, key], read), number, rounds)
    sign = _best_us(lambda: sign_event_entry(key, fields), number, rounds)
    return {
        "what": "HMAC-SHA256 over the signed event fields (hubsync.core.signing), per event",
        "verify_us": verify_1,
        "verify_during_rotation_us": verify_2,
        "sign_us": sign,
        "target_verify_us": TARGET_VERIFY_US,
        "target_met": verify_1 <= TARGET_VERIFY_US,
    }
