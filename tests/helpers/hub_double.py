"""A stand-in for the hub in relay tests: reads events streams and writes ack entries.

It judges nothing: every event it sees is ``accepted`` unless told otherwise.
It speaks the real stream protocol (``hubsync.core.entries``) and signs its
outcomes as the hub that enrolled the runtime would (``tests.helpers.trust``),
so the relay under test cannot tell it from a hub consumer.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import redis

from hubsync.core import keys
from hubsync.core.entries import (
    KIND_EVENT,
    Outcome,
    OutcomeRecord,
    decode_fields,
    entry_kind,
    outcomes_entry_fields,
)
from tests.helpers.trust import signed_outcomes

Judge = Callable[[str, str, int], tuple[Outcome, str | None]]


def stream_events(client: redis.Redis, hub_project: str) -> list[dict[str, bytes]]:
    """Every event entry (not presence) on a hub project's events streams, in stream order (the
    streams one after the other)."""
    streams = sorted(client.scan_iter(match=keys.events_stream_pattern(hub_project)))
    entries = [entry for stream in streams for entry in client.xrange(stream)]
    fields = [decode_fields(raw) for _, raw in entries]
    return [f for f in fields if entry_kind(f) == KIND_EVENT]


def ack_everything(
    client: redis.Redis, hub_project: str, judge: Judge | None = None, after: str = "-"
) -> int:
    """Write one outcome per event entry on the stream; return how many were judged."""
    return ack_events(client, hub_project, stream_events(client, hub_project), judge)


def ack_events(
    client: redis.Redis,
    hub_project: str,
    events: list[dict[str, bytes]],
    judge: Judge | None = None,
) -> int:
    """Write one outcome per event of ``events`` (``stream_events``' entries); return how many."""
    by_runtime: dict[str, list[OutcomeRecord]] = defaultdict(list)
    for fields in events:
        project_id = fields["project_id"].decode()
        run_id = fields["run_id"].decode()
        sequence = int(fields["sequence"])
        outcome, reason = judge(project_id, run_id, sequence) if judge else (Outcome.ACCEPTED, None)
        by_runtime[fields["runtime_id"].decode()].append(
            OutcomeRecord(
                project_id, run_id, sequence, outcome, fields["content_hash"].decode(), reason
            )
        )
    total = 0
    for runtime_id, records in by_runtime.items():
        for start in range(0, len(records), 500):
            chunk = records[start : start + 500]
            client.xadd(
                keys.acks_stream(hub_project, runtime_id),
                signed_outcomes(runtime_id, outcomes_entry_fields(hub_project, chunk)),
            )
            total += len(chunk)
    return total
