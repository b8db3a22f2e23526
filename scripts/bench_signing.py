#!/usr/bin/env python3
"""Benchmark: microseconds per entry signature, beside a raw ``hmac.digest`` of the same bytes.

Times ``hubsync.core.signing`` on the entries the pipeline carries: an event entry
(signed by the relay, verified by the consumer with one key, and with two
during a key rotation, the matching key second: the worst case), a presence
beat, and an outcomes entry of 500 outcomes. Each figure sits beside a
one-shot ``hmac.digest(key, message, "sha256")`` of the exact message signed
(ratio = ours / raw). The event verification is also timed the two ways HMAC
can be computed with the standard library (one-shot ``hmac.digest``, and
``copy()`` of a keyed and tagged ``hmac.HMAC``, which the module uses). The target: at most 3 us per event
verification. No Redis is needed.

    python3 scripts/bench_signing.py [--number 20000] [--repeat 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import platform
import ssl
import statistics
import sys
import timeit
from collections.abc import Callable
from typing import NamedTuple

from hubsync.benchmarks.report_file import print_report
from hubsync.core import entries, signing

TARGET_VERIFY_US = 3.0
OUTCOMES_PER_ENTRY = 500
RUNTIME = "rt-vm-76ff556c"
HUB_ID = "hub-7d0c5a52"
DIGEST = hashlib.sha256(b"bench").hexdigest()


class EventIds(NamedTuple):
    """An event's signed values but its kind and hash, in ``event_message``'s order."""

    project_id: str
    hub_project: str
    run_id: str
    sequence: int
    event_type: str
    runtime_id: str


IDS = EventIds("shop-48ee17a7", "shop", "run-2026-0001", 123456, "run.started", RUNTIME)
"""The benchmark event's (its hash is ``DIGEST``)."""


Timed = dict[str, tuple[Callable[[], object], int]]
"""Name -> (action, calls per round)."""


def _timed(actions: Timed, repeat: int) -> dict[str, dict[str, float]]:
    """Best and median microseconds per call of each action over ``repeat`` rounds.

    Rounds are interleaved (every action once per round) so that load from
    other processes on a shared machine falls on all of them alike.
    """
    samples: dict[str, list[float]] = {name: [] for name in actions}
    for action, _ in actions.values():
        action()  # warm-up
    for _ in range(repeat):
        for name, (action, number) in actions.items():
            samples[name].append(timeit.timeit(action, number=number) / number * 1e6)
    return {
        name: {"best_us": round(min(rounds), 3), "median_us": round(statistics.median(rounds), 3)}
        for name, rounds in samples.items()
    }


def _event_entry(key: signing.RuntimeKey) -> tuple[dict[str, str | bytes], dict[str, bytes]]:
    """The relay's fields of a 540-byte event, and the consumer's (signed) view of them."""
    fields = entries.raw_event_entry_fields(**IDS._asdict(), digest=DIGEST, data=b"x" * 540)
    signed: dict[str | bytes, str | bytes] = {name: value for name, value in fields.items()}
    signed[signing.SIGNATURE_FIELD] = signing.sign_event_entry(key, fields)
    return fields, entries.decode_fields(signed)


def _outcomes_entry(key: signing.RuntimeKey) -> dict[str, str]:
    records = [
        entries.OutcomeRecord(
            project_id="shop-48ee17a7",
            run_id=f"run-2026-{i // 50:04d}",
            sequence=i % 50 + 1,
            outcome=entries.Outcome.ACCEPTED,
            content_hash=DIGEST,
        )
        for i in range(OUTCOMES_PER_ENTRY)
    ]
    fields = entries.outcomes_entry_fields("shop", records) | {signing.HUB_ID_FIELD: HUB_ID}
    fields[signing.SIGNATURE_FIELD] = signing.sign_outcomes_entry(key, fields, runtime_id=RUNTIME)
    return fields


def run(number: int, repeat: int) -> dict[str, object]:
    """Time every operation and its raw ``hmac.digest`` counterpart."""
    key, previous = signing.RuntimeKey.generate(), signing.RuntimeKey.generate()
    secret = key.reveal()
    relay_fields, read_event = _event_entry(key)
    event_ids = IDS._asdict()  # made once: a call's keyword arguments, not part of the timing
    event_bytes = signing.event_message(signing.EVENT_KIND, *IDS, DIGEST)
    beat = entries.PresenceBeat(
        RUNTIME, "shop", "build-3", 4242, "0.4.0", 17, "2026-12-01T00:03:51Z"
    )
    beat_fields = beat.to_fields()
    read_beat = entries.decode_fields(
        beat_fields | {signing.SIGNATURE_FIELD: signing.sign_presence_entry(key, beat_fields)}
    )
    outcomes = _outcomes_entry(key)
    read_outcomes = entries.decode_fields(outcomes)
    outcomes_bytes = signing.outcomes_message(HUB_ID, "shop", RUNTIME, outcomes["outcomes"])
    beat_bytes = signing.presence_message(beat_fields)
    one, two = [key], [previous, key]
    assert signing.verify_event_entry(one, read_event) is key
    assert signing.verify_event_entry(two, read_event) is key
    assert signing.verify_presence_entry(one, read_beat) is key
    assert signing.verify_outcomes_entry(one, read_outcomes, runtime_id=RUNTIME) is key

    def raw(message: bytes) -> Callable[[], object]:
        return lambda: hmac.digest(secret, message, "sha256")

    operations: dict[str, tuple[Callable[[], object], bytes]] = {
        "event_sign": (
            lambda: signing.sign_event(key, **event_ids, content_hash=DIGEST),
            event_bytes,
        ),
        "event_sign_entry": (lambda: signing.sign_event_entry(key, relay_fields), event_bytes),
        "event_verify_1_key": (lambda: signing.verify_event_entry(one, read_event), event_bytes),
        "event_verify_2_keys": (lambda: signing.verify_event_entry(two, read_event), event_bytes),
        "presence_sign": (lambda: signing.sign_presence_entry(key, beat_fields), beat_bytes),
        "presence_verify": (lambda: signing.verify_presence_entry(one, read_beat), beat_bytes),
        "outcomes_500_sign": (
            lambda: signing.sign_outcomes_entry(key, outcomes, runtime_id=RUNTIME),
            outcomes_bytes,
        ),
        "outcomes_500_verify": (
            lambda: signing.verify_outcomes_entry(one, read_outcomes, runtime_id=RUNTIME),
            outcomes_bytes,
        ),
    }
    actions: Timed = {}
    for name, (action, message) in operations.items():
        count = max(100, number // 20) if name.startswith("outcomes") else number
        actions[name] = (action, count)
        actions["raw:" + name] = (_raw_digest(secret, message), count)
    actions.update(_alternatives(secret, read_event, number))
    timed = _timed(actions, repeat)
    results = {
        name: {
            "us": timed[name]["best_us"],
            "median_us": timed[name]["median_us"],
            "raw_hmac_digest_us": timed["raw:" + name]["best_us"],
            "ratio_vs_raw": round(timed[name]["best_us"] / timed["raw:" + name]["best_us"], 2),
            "message_bytes": len(message),
        }
        for name, (_, message) in operations.items()
    }
    verify = results["event_verify_1_key"]["us"]
    return {
        "benchmark": "hubsync.core.signing, microseconds per operation (best of interleaved rounds)",
        "number": number,
        "repeat": repeat,
        "operations": results,
        "event_verify_alternatives_us": {
            name.removeprefix("alt:"): timed[name]["best_us"]
            for name in actions
            if name.startswith("alt:")
        },
        "target_event_verify_us": TARGET_VERIFY_US,
        "target_met": verify <= TARGET_VERIFY_US,
        "machine": {
            "python": platform.python_version(),
            "openssl": ssl.OPENSSL_VERSION,
            "processor": platform.processor() or platform.machine(),
        },
    }


def _raw_digest(secret: bytes, message: bytes) -> Callable[[], object]:
    return lambda: hmac.digest(secret, message, "sha256")


def _alternatives(secret: bytes, fields: dict[str, bytes], number: int) -> Timed:
    """Event verification (fields to a compared signature) computed the standard-library ways."""
    tag = b"%d:%b," % (len(signing.EVENT_TAG), signing.EVENT_TAG)
    body = b"%d:%b," * len(signing.EVENT_SIGNED_FIELDS)
    base = hmac.new(secret, tag, "sha256")

    def encoded() -> bytes:
        # the same one-format encoding as signing.verify_event_entry, so only the MAC differs
        k, p, h, r = fields["kind"], fields["project_id"], fields["hub_project"], fields["run_id"]
        q, e, t = fields["sequence"], fields["event_type"], fields["runtime_id"]
        c = fields["content_hash"]
        return body % (
            len(k), k, len(p), p, len(h), h, len(r), r,
            len(q), q, len(e), e, len(t), t, len(c), c,
        )  # fmt: skip

    def one_shot() -> bool:
        mac = hmac.digest(secret, tag + encoded(), "sha256").hex()
        return hmac.compare_digest(mac, fields[signing.SIGNATURE_FIELD].decode())

    def hmac_copy() -> bool:
        mac = base.copy()
        mac.update(encoded())
        return hmac.compare_digest(mac.hexdigest(), fields[signing.SIGNATURE_FIELD].decode())

    assert one_shot() and hmac_copy()
    return {
        "alt:hmac_digest_one_shot": (one_shot, number),
        "alt:hmac_HMAC_copy": (hmac_copy, number),
    }


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print JSON on stdout and a table on stderr."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20000, help="calls per round")
    parser.add_argument("--repeat", type=int, default=7, help="rounds; the best one is reported")
    parser.add_argument("--json", dest="json_path", help="also write the JSON report here")
    args = parser.parse_args(argv)
    report = run(args.number, args.repeat)
    print_report(report, args.json_path)
    operations = report["operations"]
    assert isinstance(operations, dict)
    print(f"\n{'operation':<22} {'us':>8} {'raw hmac.digest':>16} {'ratio':>6}", file=sys.stderr)
    for name, row in operations.items():
        print(
            f"{name:<22} {row['us']:>8.3f} {row['raw_hmac_digest_us']:>16.3f} "
            f"{row['ratio_vs_raw']:>6.2f}",
            file=sys.stderr,
        )
    alternatives = report["event_verify_alternatives_us"]
    assert isinstance(alternatives, dict)
    print("\nevent verify, 1 key, computed as:", file=sys.stderr)
    for name, value in alternatives.items():
        print(f"  {name:<30} {value:>8.3f} us", file=sys.stderr)
    ours = operations["event_verify_1_key"]["us"]
    print(f"  {'hubsync (verify_event_entry)':<30} {ours:>8.3f} us", file=sys.stderr)
    met = "met" if report["target_met"] else "MISSED"
    print(f"target: event verify <= {TARGET_VERIFY_US} us: {met}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
