"""``producers.store.outbox_spans`` against ``apply_one_by_one``: the same rows and counts.

A batch that only acks is applied in spans (one UPDATE per run of consecutive
sequences, each row matched to its slice of the span's hashes); any batch applied one
by one in Python (``producers.store.outbox_outcomes.apply_one_by_one``, the reference) must
leave the same rows and count the same acked, unknown and foreign outcomes, whatever it
holds: spans, gaps, repeats, unknown or foreign outcomes, rows acked or parked before.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from hubsync.core.entries import Outcome, OutcomeRecord
from producers.derivation import StoreIdentity
from producers.store.event_store import RunEventStore, open_store_file
from producers.store.outbox_outcomes import OutcomeApplication, apply_one_by_one
from producers.store.outbox_spans import acking_spans

IDENTITY = StoreIdentity("proj-1", "acme", "rt-host-0001")


def record(
    run_id: str, sequence: int, digest: str, verdict: str, reason: str | None = None
) -> OutcomeRecord:
    return OutcomeRecord(IDENTITY.project_id, run_id, sequence, Outcome(verdict), digest, reason)


ROWS = 8


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A store of two runs (``ROWS`` events each), closed, and the hashes of run-1 then run-2."""
    path = tmp_path_factory.mktemp("outcomes") / "template.sqlite"
    with RunEventStore(path, IDENTITY, environ={}) as made:
        for i in range(ROWS):
            made.append_event("run-1", "step.started", {"i": i})
            made.append_event("run-2", "step.started", {"i": i})
        hashes = [r.content_hash for run in ("run-1", "run-2") for r in made.outbox_for_run(run)]
    return path, hashes


outcome_specs = st.tuples(
    st.sampled_from(["run-1", "run-2", "run-9", ""]),
    st.integers(0, ROWS + 1),
    st.sampled_from(["accepted", "duplicate", "conflict"]),
    st.booleans(),  # names the row's own hash
)


@settings(max_examples=150, deadline=None)
@given(
    earlier=st.lists(outcome_specs, max_size=6),
    batch=st.lists(
        st.one_of(outcome_specs.filter(lambda spec: spec[2] != "conflict"), outcome_specs),
        max_size=14,
    ),
)
def test_a_batch_applied_in_spans_leaves_what_one_by_one_leaves(
    template: tuple[Path, list[str]],
    tmp_path_factory: pytest.TempPathFactory,
    earlier: list[tuple[str, int, str, bool]],
    batch: list[tuple[str, int, str, bool]],
) -> None:
    """Whatever a batch holds (spans, gaps, repeats, unknown or foreign outcomes, rows acked
    or parked before), ``apply_outcomes`` (in spans when the batch only acks) leaves the
    rows and counts what applying its outcomes one by one leaves."""
    path, hashes = template

    def records(specs: list[tuple[str, int, str, bool]]) -> list[OutcomeRecord]:
        return [
            record(
                run,
                sequence,
                hashes[(run == "run-2") * ROWS + (sequence - 1) % ROWS] if own else "b" * 64,
                verdict,
                "sequence_reused" if verdict == "conflict" else None,
            )
            for run, sequence, verdict, own in specs
        ]

    if acking_spans(records(batch), now=100.0) is not None:
        event("applied in spans")
    directory = tmp_path_factory.mktemp("applied")
    results: list[tuple[OutcomeApplication, list[object]]] = []
    for name in ("together", "one_by_one"):
        shutil.copy(path, directory / f"{name}.sqlite")
        with open_store_file(directory / f"{name}.sqlite", environ={}) as opened:
            opened.apply_outcomes(records(earlier), now=50.0)
            if name == "together":
                applied = opened.apply_outcomes(records(batch), now=100.0)
            else:
                applied = opened._db.write(lambda c: apply_one_by_one(c, records(batch), now=100.0))
            rows = [*opened.outbox_for_run("run-1"), *opened.outbox_for_run("run-2")]
            results.append((applied, [(r.acked_at, r.outcome, r.outcome_reason) for r in rows]))
    assert results[0] == results[1]


def test_a_drains_batch_is_applied_in_spans(template: tuple[Path, list[str]]) -> None:
    """The batches the property above compares in spans include a drain's: one ``accepted``
    per row, runs of consecutive sequences, one span per run."""
    _, hashes = template
    batch = [record("run-1", n + 1, hashes[n], "accepted") for n in range(ROWS)] + [
        record("run-2", n + 1, hashes[ROWS + n], "duplicate") for n in range(3)
    ]
    spans = acking_spans(batch, now=100.0)
    assert spans is not None
    assert [span[1:5] for span in spans] == [
        ("accepted", "run-1", 1, ROWS),
        ("duplicate", "run-2", 1, 3),
    ]
    assert acking_spans([*batch, record("run-1", 1, hashes[0], "conflict")], now=1.0) is None
