"""``hubsync outbox retry`` on a live pipeline (the real relay and hub consumer on a private
Redis): rows parked by a conflict are re-queued once its cause is fixed at the hub, and then
accepted; a parked row whose bytes hold a secret known now stays parked."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from hubsync.core.entries import Outcome
from tests.helpers.operator_support import LivePipeline, run_cli

SECRET = "s3cr3t-deploy-value-77"


@pytest.fixture
def pipeline(tmp_path: Path, redis_url: str) -> Iterator[LivePipeline]:
    with LivePipeline(tmp_path, redis_url) as live:
        yield live


def park_by_a_conflict(p: LivePipeline, *run_ids: str) -> None:
    """The hub first stores other bytes under sequence 1 of each run (a forged copy signed
    with the runtime's key); the genuine rows are then answered ``conflict`` and parked."""
    for run_id in run_ids:
        p.inject_conflict(run_id, 1)
    p.consume_once()  # the forged copy is stored; its outcome names other bytes than the row's
    p.relay_once()  # sends the genuine rows
    p.consume_once()  # sequence 1: conflict
    p.relay_once()  # applies the outcomes: sequence 1 parked


def outcomes_of(p: LivePipeline, run_id: str) -> list[str | None]:
    return [entry.outcome for entry in p.store.outbox_for_run(run_id)]


def remove_hub_row(p: LivePipeline, run_id: str, sequence: int) -> None:
    """The fix at the hub: the wrong row goes (with plain SQL, as an operator would)."""
    with sqlite3.connect(p.hub_db) as conn:
        conn.execute(
            "DELETE FROM sync_events WHERE project_id = ? AND run_id = ? AND sequence = ?",
            (p.registration.project_id, run_id, sequence),
        )


def test_rows_parked_by_a_conflict_are_accepted_once_retried_after_the_fix(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    p = pipeline
    p.append("run-a", 3)
    park_by_a_conflict(p, "run-a")
    assert outcomes_of(p, "run-a") == [Outcome.CONFLICT, Outcome.ACCEPTED, Outcome.ACCEPTED]

    # retried before the cause is fixed: the hub answers conflict again
    early = run_cli(capsys, "outbox", "retry", "--state-dir", str(p.state_dir))
    assert early.code == 0, early.err
    assert f"project {p.registration.project_id} run run-a: 1 re-queued" in early.out
    p.relay_once()
    p.consume_once()
    p.relay_once()
    assert outcomes_of(p, "run-a")[0] == Outcome.CONFLICT

    remove_hub_row(p, "run-a", 1)
    args = ["outbox", "retry", "--state-dir", str(p.state_dir), "--outcome", "conflict"]
    run = run_cli(capsys, *args, "--project-id", p.registration.project_id, "--json")
    assert run.code == 0, run.err
    assert json.loads(run.out) == {
        "requeued": 1,
        "refused": 0,
        "runs": [
            {
                "project_id": p.registration.project_id,
                "run_id": "run-a",
                "requeued": 1,
                "refused": 0,
            }
        ],
    }
    assert p.store.outbox_counts()["conflict"] == 0
    p.relay_once()  # resent at once: due now
    p.consume_once()
    p.relay_once()
    assert outcomes_of(p, "run-a") == [Outcome.ACCEPTED] * 3
    [genuine] = [e for e in p.store.outbox_for_run("run-a") if e.sequence == 1]
    [stored] = [e for e in p.hub.events("acme", run_id="run-a") if e.sequence == 1]
    assert stored.content_hash == genuine.content_hash
    again = run_cli(capsys, "outbox", "retry", "--state-dir", str(p.state_dir))
    assert again.code == 0 and again.out == "no parked rows to retry\n"


def test_a_parked_row_holding_a_secret_known_now_stays_parked(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    p = pipeline
    p.store.append_event("run-s", "step.completed", {"step_name": SECRET})  # not a secret yet
    p.append("run-b", 1)
    park_by_a_conflict(p, "run-s", "run-b")
    assert outcomes_of(p, "run-s") == [Outcome.CONFLICT]

    run = run_cli(
        capsys, "outbox", "retry", "--state-dir", str(p.state_dir), env={"DEPLOY_TOKEN": SECRET}
    )
    assert run.code == 0, run.err
    assert "run run-s: 0 re-queued, 1 refused (their bytes hold a secret)" in run.out
    assert "run run-b: 1 re-queued" in run.out
    assert "stay parked" in run.err and SECRET not in run.out + run.err
    assert outcomes_of(p, "run-s") == [Outcome.CONFLICT]
    assert outcomes_of(p, "run-b") == [None]


def test_filters_and_bad_arguments(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    p = pipeline
    p.append("run-a", 1)
    p.append("run-b", 1)
    park_by_a_conflict(p, "run-a", "run-b")
    base = ["outbox", "retry", "--state-dir", str(p.state_dir), "--json"]
    assert json.loads(run_cli(capsys, *base, "--outcome", "rejected").out)["requeued"] == 0
    only_b = json.loads(run_cli(capsys, *base, "--run", "run-b").out)
    assert only_b["requeued"] == 1 and outcomes_of(p, "run-a") == [Outcome.CONFLICT]
    unknown = run_cli(capsys, *base, "--project-id", "nope-1")
    assert unknown.code == 2 and "no project nope-1 is registered" in unknown.err
    bad = run_cli(capsys, *base, "--outcome", "accepted")
    assert bad.code == 2 and bad.err.count("\n") == 1
    missing = run_cli(capsys, "outbox", "retry", "--state-dir", str(p.state_dir / "nope"))
    assert missing.code == 2 and missing.err.count("\n") == 1
