"""``hubsync produce``: synthetic run events through the real ``append_event`` path."""

from __future__ import annotations

import json
import random
import sqlite3
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from hubsync.cli.options import env_option, json_option, options_from
from hubsync.core.settings import ProduceSettings, RuntimeSettings
from producers.errors import UnreadableStoreError
from producers.registry import ProjectRegistration, RuntimeRegistry
from producers.store.event_store import NewEvent, RunEventStore
from producers.store.unreadable import unreadable_reason
from producers.synthetic import run_events

_BATCH_LIMIT = 500  # events per append_events transaction in --batch mode


@click.command(
    epilog="""\b
Examples:
  hubsync produce --state-dir ~/.hubsync --project-root ~/src/shop --runs 10 --events-per-run 50
  hubsync produce --state-dir /tmp/rt --project-root /tmp/p --runs 1000 --events-per-run 20 \\
      --batch --payload-bytes 2048 --json --create
  MY_API_KEY=s3cr3t-value hubsync produce --state-dir /tmp/rt --project-root /tmp/p \\
      --runs 2 --events-per-run 5 --plant s3cr3t-value --plant ghp_<36 letters>
"""
)
@options_from(RuntimeSettings, only=["state_dir"])
@env_option(
    "--project-root",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Root of the project the events belong to (registered on first use).",
)
@options_from(RuntimeSettings, only=["runtime_id"])
@options_from(ProduceSettings)
@click.option(
    "--create",
    is_flag=True,
    help="Create the state dir (a new runtime) if it holds no registry yet; without it a "
    "missing state dir is refused, so a mistyped path never becomes a new runtime (no "
    "environment variable).",
)
@json_option
def produce(
    state_dir: Path,
    project_root: Path,
    runtime_id: str | None,
    hub_project: str | None,
    runs: int,
    events_per_run: int,
    payload_bytes: int,
    plant: tuple[str, ...],
    batch: bool,
    seed: int | None,
    create: bool,
    as_json: bool,
) -> None:
    """Append synthetic workflow-run events to a project's outbox.

    Every event goes through the real append path: allowlist, redaction of
    registered, environment (*_TOKEN, *_SECRET, *_PASSWORD, *_API_KEY, *_KEY)
    and well-known credential secrets, canonical bytes, hash, one SQLite
    transaction with the outbox row.

    The state dir must exist already (hubsync runtime join creates it), unless
    --create is given: a missing one is refused (exit 2) and nothing is created.
    """
    rng = random.Random(seed)
    started = time.perf_counter()
    run_ids: list[str] = []
    with RuntimeRegistry(state_dir, runtime_id, create=create) as registry:
        registration = registry.register_project(project_root, hub_project)
        with _open_store(registry, registration) as store, _progress(runs * events_per_run) as tick:
            for _ in range(runs):
                run_id = f"run-{uuid.uuid4().hex[:16]}"
                run_ids.append(run_id)
                events = run_events(events_per_run, payload_bytes, plant, rng)
                if batch:
                    _append_batched(store, run_id, events, tick)
                else:
                    for event_type, payload in events:
                        store.append_event(run_id, event_type, payload)
                        tick(1)
            counts = store.outbox_counts()
            store_path = store.path
        runtime = registry.runtime_id
    seconds = time.perf_counter() - started
    total = runs * events_per_run
    report: dict[str, Any] = {
        "runtime_id": runtime,
        "project_id": registration.project_id,
        "hub_project": registration.hub_project,
        "store_path": str(store_path),
        "runs": runs,
        "events": total,
        "batch": batch,
        "seconds": round(seconds, 4),
        "events_per_second": round(total / seconds, 1) if seconds > 0 else None,
        "outbox": counts,
        "run_ids": run_ids,
    }
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(
        f"produced {total} events in {runs} runs for project {registration.project_id} "
        f"(hub project {registration.hub_project}, runtime {runtime}) in {seconds:.2f}s "
        f"({report['events_per_second']} events/s); outbox: {counts['pending']} pending, "
        f"{counts['acked']} acked, {counts['total']} total"
    )


def _open_store(registry: RuntimeRegistry, registration: ProjectRegistration) -> RunEventStore:
    """The project's store; one that cannot be created or read is one line naming the file."""
    try:
        return registry.open_store(registration)
    except (OSError, sqlite3.DatabaseError) as exc:
        # hubsync's own refusals (schema version, binding) say what to do already
        raise UnreadableStoreError(
            f"project {registration.project_id}: {unreadable_reason(exc, registration.store_path)}"
        ) from exc


def _append_batched(
    store: RunEventStore,
    run_id: str,
    events: Iterator[tuple[str, dict[str, Any]]],
    tick: Any,
) -> None:
    chunk: list[NewEvent] = []
    for event_type, payload in events:
        chunk.append(NewEvent(run_id, event_type, payload))
        if len(chunk) >= _BATCH_LIMIT:
            store.append_events(chunk)
            tick(len(chunk))
            chunk = []
    if chunk:
        store.append_events(chunk)
        tick(len(chunk))


@contextmanager
def _progress(total: int) -> Iterator[Any]:
    """A progress bar on stderr for long runs when stderr is a terminal; else a no-op."""
    if total < 2_000 or not sys.stderr.isatty():
        yield lambda _n: None
        return
    with click.progressbar(length=total, label="appending", file=sys.stderr) as bar:
        yield bar.update
