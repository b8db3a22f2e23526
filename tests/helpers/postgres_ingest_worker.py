"""Entries that race for keys, projects and runs, and a process that ingests them.

``universe()`` is the same list of entries in every process: genuine runs, and
rivals for some of their keys (other bytes), for one project (another hub
project) and for another project (another runtime), so that which copy wins
depends on timing. ``ingest_shuffled`` is what one of several processes does:
open the store, wait for the start signal, ingest the whole universe once
(plus some repeats) in its own random order and batch sizes, and hand back
every outcome.
"""

from __future__ import annotations

import random
from multiprocessing.synchronize import Event

from hubstore import open_store
from hubsync.core.entries import EventEntry
from tests.helpers.relay_player import event_entry, sync_event

Outcome = tuple[str, str, int, str, str, str | None]
"""(project, run, sequence, content hash, outcome, reason) of one ingested entry."""


def universe() -> list[EventEntry]:
    """Every entry the racing processes send (the same list in each process)."""
    entries = [
        event_entry(
            sync_event(
                seq, run_id=f"run-{run}", project_id=f"p{project}", runtime_id=f"rt-{project % 2}"
            )
        )
        for project in range(4)
        for run in range(5)
        for seq in range(1, 41)
    ]
    picker = random.Random(7)
    # other bytes under keys of the genuine runs: one of the two copies wins each key
    for project, run, seq in picker.sample(
        [(p, r, s) for p in range(4) for r in range(5) for s in range(1, 41)], 60
    ):
        entries.append(
            event_entry(
                sync_event(
                    seq,
                    run_id=f"run-{run}",
                    project_id=f"p{project}",
                    runtime_id=f"rt-{project % 2}",
                    data={"forged": True},
                )
            )
        )
    # two hub projects race for one project; two runtimes for another
    for seq in range(1, 21):
        entries.append(event_entry(sync_event(seq, run_id="c-0", project_id="p-contested")))
        entries.append(
            event_entry(
                sync_event(seq, run_id="c-1", project_id="p-contested", hub_project="other")
            )
        )
        for runtime_id in ("rt-0", "rt-1"):
            entries.append(
                event_entry(
                    sync_event(seq, run_id=f"r-{runtime_id}", project_id="p-owned",
                               runtime_id=runtime_id)
                )
            )  # fmt: skip
    return entries


def ingest_shuffled(url: str, seed: int, start: Event) -> list[Outcome]:
    """Ingest the universe in a random order and random batches once ``start`` is set."""
    rng = random.Random(seed)
    entries = universe()
    order = entries + rng.sample(entries, len(entries) // 5)
    rng.shuffle(order)
    outcomes: list[Outcome] = []
    with open_store(url, create_schema=False) as store:
        if not start.wait(timeout=60):
            raise RuntimeError("no start signal within 60 s")
        at = 0
        while at < len(order):
            size = rng.randint(1, 80)
            batch = order[at : at + size]
            at += size
            for entry, outcome in zip(batch, store.ingest(batch), strict=True):
                outcomes.append(
                    (*entry.key, entry.content_hash, outcome.outcome.value, outcome.reason)
                )
    return outcomes
