"""Four processes ingest overlapping batches into one PostgreSQL hub store at the same time.

Each process sends every entry of ``tests.helpers.postgres_ingest_worker.universe()``
(genuine runs, and rivals for some keys, for one project's hub project and for another's
runtime) in its
own random order and batch sizes, some twice. Which rival wins depends on
timing; what must hold whatever the timing:

* each stored key was answered ``accepted`` exactly once across the four
  processes, with the bytes stored, and no key that is not stored was;
* the state equals a single-process ingest of the same entries given the same
  winners: the reference store ingests the stored events first, then every
  entry, and must end with the same events and the same alerts (key, reason,
  offered bytes): no conflict was lost, none invented;
* each alert counts exactly the ``conflict`` answers given for it.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

import pytest

from hubstore import open_store
from hubstore.store import HubStore
from tests.helpers.postgres_ingest_worker import Outcome, ingest_shuffled, universe
from tests.helpers.postgres_server import PostgresDatabases
from tests.helpers.support import scrub_environment

PROCESSES = 4


def stored_events(store: HubStore) -> set[tuple[str, str, int, str, str, str]]:
    events = store.events("acme", limit=100_000) + store.events("other", limit=100_000)
    assert len(events) == store.count_events()
    return {
        (e.project_id, e.run_id, e.sequence, e.hub_project, e.home_runtime_id, e.content_hash)
        for e in events
    }


def alert_keys(store: HubStore) -> dict[tuple[str, str, int, str, str], int]:
    alerts = store.alerts(limit=100_000)
    keys = {
        (a.project_id, a.run_id, a.sequence, a.reason.value, a.offered_hash): a.occurrences
        for a in alerts
    }
    assert len(keys) == len(alerts)
    return keys


def test_four_processes_ingesting_overlapping_batches_agree_with_one(
    postgres_databases: PostgresDatabases, monkeypatch: pytest.MonkeyPatch
) -> None:
    scrub_environment(monkeypatch)  # the spawned processes inherit this environment
    url = postgres_databases.new_url()
    open_store(url, create_schema=True).close()
    context = multiprocessing.get_context("spawn")
    with (
        context.Manager() as manager,
        ProcessPoolExecutor(PROCESSES, mp_context=context) as pool,
    ):
        start = manager.Event()  # every process opens its store first, then they go at once
        futures = [pool.submit(ingest_shuffled, url, seed, start) for seed in range(PROCESSES)]
        start.set()
        answers: list[Outcome] = [o for f in futures for o in f.result(timeout=240)]

    with open_store(url, create_schema=False) as store:
        events = stored_events(store)
        alerts = alert_keys(store)
    stored = {(p, r, s): h for p, r, s, _, _, h in events}

    accepted = Counter((p, r, s) for p, r, s, _, outcome, _ in answers if outcome == "accepted")
    assert set(accepted) == set(stored)
    assert set(accepted.values()) == {1}, "a key was accepted twice"
    for p, r, s, digest, outcome, _ in answers:
        if outcome == "accepted":
            assert stored[(p, r, s)] == digest
        elif outcome == "duplicate":
            assert stored.get((p, r, s)) == digest

    conflicts = Counter(
        (p, r, s, reason, digest) for p, r, s, digest, outcome, reason in answers
        if outcome == "conflict"
    )  # fmt: skip
    assert conflicts == Counter(alerts), "an alert does not count its conflicts"

    entries = universe()
    winners = [e for e in entries if stored.get(e.key) == e.content_hash]
    with open_store(postgres_databases.new_url(), create_schema=True) as reference:
        assert {o.outcome.value for o in reference.ingest(winners)} == {"accepted"}
        for start_at in range(0, len(entries), 100):
            reference.ingest(entries[start_at : start_at + 100])
        assert stored_events(reference) == events
        assert set(alert_keys(reference)) == set(alerts)
    # the rivals made every kind of conflict
    assert {reason for *_, reason, _ in alerts} == {
        "sequence_reused",
        "project_mismatch",
        "not_owner",
    }
