"""The event store's schema migration 2 -> 3: each outbox row keeps its caller's trace context.

A version-2 file is built with the exact DDL hubsync shipped as version 2 (kept here, never
edited), holding rows in every outbox state. Opened, it is upgraded after a backup, keeps
every row byte for byte with no trace context, and the relay sends its unsent rows without
a ``traceparent`` field, as before; an event appended afterwards inside a span keeps that
span's context, and the relay carries it, signed.
"""

from __future__ import annotations

from pathlib import Path

import redis
from opentelemetry.sdk.trace import TracerProvider

from hubsync.core.entries import TRACED_EVENT_ENTRY_FIELDS
from hubsync.core.signing import verify_event_entry
from hubsync.core.sqlite import backup_path
from producers.registry import RuntimeRegistry
from producers.relay import Relay
from producers.store.event_store import EVENT_STORE_SCHEMA_VERSION
from tests.helpers.hub_double import stream_events
from tests.helpers.relay_support import relay_settings
from tests.helpers.sqlite_files import read_only, version_of
from tests.helpers.trust import key_of
from tests.producers.shipped_schemas import EVENT_STORE_SCHEMA_V2
from tests.producers.test_migrations_event_store import (
    HUB_PROJECT,
    file_rows,
    fresh_store_schema,
    old_runtime,
    reopened_store,
    rewrite_as_old,
    schema_of,
)


def rewrite_as_v2(path: Path) -> None:
    """Replace the store at ``path`` by a version-2 file holding the same rows, numbers and all."""
    copies = [
        f"INSERT INTO main.{table} SELECT * FROM source.{table}"
        for table in ("store_meta", "run_events", "relay_state", "outbox")
    ]
    copies.append(
        "INSERT INTO main.outbox_payloads SELECT seq, sync_event FROM source.outbox_payloads"
    )
    rewrite_as_old(path, EVENT_STORE_SCHEMA_V2, 2, copies)


def v2_runtime(state_dir: Path) -> tuple[RuntimeRegistry, Path, dict[str, list[tuple[str, int]]]]:
    """A runtime with one project whose store is a version-2 file in every outbox state."""
    return old_runtime(state_dir, rewrite_as_v2, 2)


def test_a_v2_store_is_upgraded_keeping_every_row_with_no_trace_context(tmp_path: Path) -> None:
    registry, path, _ = v2_runtime(tmp_path / "state")
    registry.close()
    before = file_rows(path)
    with reopened_store(tmp_path / "state") as store:
        pending = store.unsent(0, 100)
    assert version_of(path) == EVENT_STORE_SCHEMA_VERSION == 3
    backup = backup_path(path, 2)
    assert version_of(backup) == 2 and file_rows(backup) == before
    assert file_rows(path) == before
    assert schema_of(path) == fresh_store_schema(tmp_path)
    assert pending and {row.traceparent for row in pending} == {None}
    with read_only(path) as conn:
        assert (
            conn.execute(
                "SELECT count(*) FROM outbox_payloads WHERE traceparent IS NOT NULL"
            ).fetchone()[0]
            == 0
        )


def test_the_relay_sends_upgraded_rows_as_before_and_a_traced_append_with_its_traceparent(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    registry, _, keys = v2_runtime(tmp_path / "state")
    tracer = TracerProvider().get_tracer("runtime")
    store = registry.open_store(registry.projects()[0])
    with tracer.start_as_current_span("commit") as span:
        store.append_event("run-b", "step.completed", {"step": "b4"})
    context = span.get_span_context()
    store.close()

    relay = Relay(relay_settings(tmp_path / "state", redis_url), registry)
    relay.run_once()
    relay.close()
    registry.close()

    sent = stream_events(redis_client, HUB_PROJECT)
    assert [(f["run_id"].decode(), int(f["sequence"])) for f in sent] == [
        *keys["unsent"],
        ("run-b", 4),
    ]
    *old, traced = sent
    assert all("traceparent" not in f for f in old)
    assert set(traced) == TRACED_EVENT_ENTRY_FIELDS
    assert traced["traceparent"] == (
        f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}".encode()
    )
    key = key_of(traced["runtime_id"].decode())
    assert key is not None and verify_event_entry([key], traced) is key
    # the traceparent is signed: changed, or taken away, the entry no longer verifies
    forged = dict(traced, traceparent=b"00-" + b"1" * 32 + b"-" + b"2" * 16 + b"-01")
    stripped = {name: value for name, value in traced.items() if name != "traceparent"}
    assert verify_event_entry([key], forged) is None
    assert verify_event_entry([key], stripped) is None
