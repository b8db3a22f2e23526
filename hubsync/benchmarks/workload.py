"""The benchmark workload: sync events of about 540 bytes, as runtimes and stream entries.

One payload shape serves every measurement, so the pipeline, its ceilings and
its peers all move the same bytes: a ``step.completed`` whose allowlisted
fields (step id and name, status, duration, outputs, metrics) make a canonical
sync event of about ``EVENT_BYTES`` bytes.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from hubstore.factory import open_store
from hubstore.sqlite.schema import SCHEMA_STATEMENTS
from hubstore.sqlite.store import HUB_SYNCHRONOUS
from hubstore.store import HubStore
from hubsync.core.entries import event_entry_fields
from hubsync.core.redis_values import as_text
from hubsync.core.settings import hub_url_from_path
from hubsync.core.signing import SIGNATURE_FIELD, RuntimeKey, sign_event_entry
from hubsync.core.wire import SyncEvent
from hubsync.provisioning import enroll_runtime
from producers.registry import RuntimeRegistry
from producers.store.event_store import NewEvent, RunEventStore

EVENT_BYTES = 540
"""Target size of one canonical sync event."""

HUB_PROJECT = "bench"
EVENTS_PER_RUN = 100
OCCURRED_AT = "2026-11-29T16:38:54.123456Z"

_BASE_PAYLOAD: dict[str, Any] = {
    "step_id": "step-00000",
    "step_name": "build",
    "status": "succeeded",
    "duration_ms": 1234,
    "metrics": {"cpu_seconds": 12.5, "max_rss_mb": 512},
    "outputs": {"artifact": "dist/app.tar.gz", "summary": ""},
    "stdout_tail": "local only: never crosses",
}


@functools.cache
def _summary() -> str:
    """The ``outputs.summary`` text that brings a sync event to about ``EVENT_BYTES``."""
    derived = {k: v for k, v in _BASE_PAYLOAD.items() if k != "stdout_tail"}
    probe = sync_event_for(0, "run-00000", 1, derived)
    missing = EVENT_BYTES - len(probe.canonical_bytes())
    return ("compiled 42 modules, linked 3 artifacts, all checks green; " * 20)[: max(0, missing)]


def payload(index: int) -> dict[str, Any]:
    """The local payload of event ``index`` (its sync event is about ``EVENT_BYTES``)."""
    return {
        **_BASE_PAYLOAD,
        "step_id": f"step-{index % 100_000:05d}",
        "outputs": {"artifact": "dist/app.tar.gz", "summary": _summary()},
    }


def sync_event_for(
    runtime: int, run_id: str, sequence: int, data: dict[str, Any] | None = None
) -> SyncEvent:
    """A sync event as a runtime's relay would send it (``data`` = the derived fields)."""
    body = data if data is not None else _derived(sequence)
    return SyncEvent.model_validate(
        {
            "project_id": f"proj-{runtime}",
            "hub_project": HUB_PROJECT,
            "home_runtime_id": bench_runtime_id(runtime),
            "run_id": run_id,
            "sequence": sequence,
            "event_type": "step.completed",
            "occurred_at": OCCURRED_AT,
            "data": body,
        }
    )


def _derived(index: int) -> dict[str, Any]:
    local = payload(index)
    return {k: local[k] for k in ("step_id", "step_name", "status", "duration_ms", "metrics")} | {
        "outputs": local["outputs"]
    }


def bench_runtime_id(runtime: int) -> str:
    """The runtime id of bench runtime number ``runtime`` (as in ``sync_event_for``)."""
    return f"rt-bench-{runtime}"


def entries(
    count: int,
    runtimes: int = 3,
    keys: list[RuntimeKey] | None = None,
    *,
    payload_bytes: int | None = None,
) -> list[dict[str, str | bytes]]:
    """``count`` valid event entries over ``runtimes`` runtimes, ``EVENTS_PER_RUN`` per run;
    each signed with its runtime's key when ``keys`` (one per runtime) is given. With
    ``payload_bytes``, each event's data is an output of that many bytes instead of the
    usual step (to measure how a cost grows with the entry's size)."""
    out = []
    for index in range(count):
        runtime = index % runtimes
        per_runtime = index // runtimes
        run_id = f"run-{per_runtime // EVENTS_PER_RUN:05d}"
        body = None
        if payload_bytes is not None:
            body = {"outputs": "x" * payload_bytes, "step_id": f"step-{index}"}
        event = sync_event_for(runtime, run_id, per_runtime % EVENTS_PER_RUN + 1, body)
        data, digest = event.encoded()
        fields = event_entry_fields(event, data, digest)
        if keys is not None:
            fields[SIGNATURE_FIELD] = sign_event_entry(keys[runtime], fields)
        out.append(fields)
    return out


def enroll_bench_runtimes(hub: HubStore, runtimes: int = 3) -> list[RuntimeKey]:
    """Enroll the bench runtimes ``entries`` writes as on ``hub``; their keys, in order."""
    if hub.hub_id() is None:
        hub.init_hub()
    return [
        RuntimeKey(hub.enroll(bench_runtime_id(runtime), [HUB_PROJECT]).key)
        for runtime in range(runtimes)
    ]


def iter_rows(batch: Iterable[Mapping[str, str | bytes]]) -> Iterator[tuple[Any, ...]]:
    """``sync_events`` rows of a batch of entries (the raw ceilings' and peers' insert)."""
    for f in batch:
        yield (
            as_text(f["project_id"]),
            as_text(f["run_id"]),
            int(f["sequence"]),
            as_text(f["hub_project"]),
            as_text(f["runtime_id"]),
            as_text(f["event_type"]),
            as_text(f["content_hash"]),
            OCCURRED_AT,
            as_text(f["event"]),
        )


def raw_hub_table(path: Path) -> sqlite3.Connection:
    """A fresh SQLite file with the hub's ``sync_events`` table, WAL, and the hub store's durability
    (``HUB_SYNCHRONOUS``), so the raw ceilings commit as durably as the hub they are compared to."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(f"PRAGMA synchronous = {HUB_SYNCHRONOUS}")
    for statement in SCHEMA_STATEMENTS[:2]:  # sync_events and its index
        db.execute(statement)
    return db


INSERT_ROW = "INSERT OR IGNORE INTO sync_events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"


def runtime_with_backlog(
    root: Path,
    events: int,
    synchronous: str = "FULL",
    hub_url: str | None = None,
    join: bool = True,
) -> tuple[RuntimeRegistry, RunEventStore]:
    """A runtime with one project whose outbox holds ``events`` pending rows, enrolled on
    the hub at ``hub_url`` (default: ``ROOT/hub.db``, where the bench's consumers write);
    with ``join`` False the runtime is not joined yet (``join_bench_hub`` does it), so a relay
    started on it sends nothing until then."""
    registry, stores = runtime_with_backlogs(
        root, events, (HUB_PROJECT,), synchronous, hub_url, join=join
    )
    return registry, stores[0]


def runtime_with_backlogs(
    root: Path,
    events: int,
    hub_projects: Sequence[str],
    synchronous: str = "FULL",
    hub_url: str | None = None,
    join: bool = True,
) -> tuple[RuntimeRegistry, list[RunEventStore]]:
    """A runtime with one project per hub project, ``events`` pending rows spread evenly over
    their outboxes (runs of ``EVENTS_PER_RUN``), enrolled on the hub at ``hub_url`` (default:
    ``ROOT/hub.db``) for every one of those hub projects (unless ``join`` is False)."""
    registry = RuntimeRegistry(root / "state")
    if join:
        join_bench_hub(registry, hub_url or hub_url_from_path(root / "hub.db"), hub_projects)
    stores = []
    for index, hub_project in enumerate(hub_projects):
        project_root = root / ("project" if len(hub_projects) == 1 else f"project-{index}")
        project_root.mkdir(parents=True, exist_ok=True)
        registration = registry.register_project(project_root, hub_project=hub_project)
        store = registry.open_store(registration, synchronous=synchronous)
        share = events // len(hub_projects) + (index < events % len(hub_projects))
        append_backlog(store, share)
        stores.append(store)
    return registry, stores


def join_bench_hub(
    registry: RuntimeRegistry, hub_url: str, hub_projects: Sequence[str] = (HUB_PROJECT,)
) -> None:
    """Enroll ``registry``'s runtime for ``hub_projects`` on the hub at ``hub_url`` and join
    it there (a relay running on it starts sending at its next refresh)."""
    with open_store(hub_url, create_schema=True) as hub:
        enroll_runtime(hub, registry, list(hub_projects))


def append_backlog(store: RunEventStore, events: int, start: int = 0) -> None:
    """Append ``events`` bench events in transactions of 5,000 (not timed by anyone)."""
    batch: list[NewEvent] = []
    for index in range(start, start + events):
        batch.append(
            NewEvent(f"run-{index // EVENTS_PER_RUN:05d}", "step.completed", payload(index))
        )
        if len(batch) == 5_000:
            store.append_events(batch)
            batch.clear()
    if batch:
        store.append_events(batch)
