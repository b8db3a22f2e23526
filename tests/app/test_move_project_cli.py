"""``hubsync hub move-project``: a project and its runs given to another runtime, on a SQLite hub;
refusals are one line, exit 2, and change nothing."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from hubstore import hub_url_from_path, open_store
from hubsync.core.entries import ConflictReason, Outcome
from tests.helpers.operator_support import CliRun, run_cli
from tests.helpers.relay_player import event_entry, sync_event

Cli = Callable[..., CliRun]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return functools.partial(run_cli, capsys)


@pytest.fixture
def hub_db(tmp_path: Path) -> Path:
    """A hub whose proj-1 (hub project acme) belongs to rt-old, with two runs; rt-new enrolled
    for acme, rt-beta for beta only, rt-gone revoked."""
    path = tmp_path / "hub.db"
    with open_store(hub_url_from_path(path), create_schema=True) as store:
        store.init_hub()
        for runtime_id, projects in (("rt-new", ["acme"]), ("rt-beta", ["beta"]),
                                     ("rt-gone", ["acme"])):  # fmt: skip
            store.enroll(runtime_id, projects)
        store.revoke("rt-gone")
        store.ingest([event_entry(sync_event(1, run_id=r, runtime_id="rt-old"))
                      for r in ("run-1", "run-2")])  # fmt: skip
    return path


def outcome_of(hub_db: Path, runtime_id: str) -> tuple[Outcome, str | None]:
    """What the hub answers ``runtime_id`` for a new event of proj-1."""
    with open_store(hub_url_from_path(hub_db), create_schema=False) as store:
        [outcome] = store.ingest([event_entry(sync_event(2, runtime_id=runtime_id))])
    return outcome.outcome, outcome.reason


def test_move_project_gives_the_project_and_its_runs_to_the_runtime(cli: Cli, hub_db: Path) -> None:
    done = cli("hub", "move-project", "proj-1", "--to", "rt-new", "--hub-db", str(hub_db))
    assert done.code == 0, done.err
    assert done.out == (
        "moved project proj-1 (hub project acme) from runtime rt-old to runtime rt-new: 2 runs "
        "re-homed (move 1); only rt-new's key may write it now\n"
    )
    # the audit line, logged
    assert "project proj-1 of hub project acme moved from runtime rt-old to runtime rt-new" in (
        done.err
    )
    assert outcome_of(hub_db, "rt-new") == (Outcome.ACCEPTED, None)
    assert outcome_of(hub_db, "rt-old") == (Outcome.CONFLICT, ConflictReason.NOT_OWNER)


def test_move_project_json(cli: Cli, hub_db: Path) -> None:
    url = hub_url_from_path(hub_db)
    done = cli("hub", "move-project", "proj-1", "--to", "rt-new", "--hub-url", url, "--json")
    assert done.code == 0, done.err
    document = json.loads(done.out)
    assert document.pop("moved_at").endswith("Z")
    assert document == {
        "action": "moved",
        "move_id": 1,
        "project_id": "proj-1",
        "hub_project": "acme",
        "from_runtime_id": "rt-old",
        "to_runtime_id": "rt-new",
        "runs": 2,
    }
    with open_store(url, create_schema=False) as store:
        [move] = store.project_moves()
    assert (move.move_id, move.to_runtime_id) == (1, "rt-new")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["proj-9", "--to", "rt-new"], "project proj-9 is not known to this hub"),
        (["proj-1", "--to", "rt-nobody"], "runtime rt-nobody: it was never enrolled"),
        (["proj-1", "--to", "rt-gone"], "runtime rt-gone: it is revoked"),
        (["proj-1", "--to", "rt-beta"], "it is not enrolled for hub project acme"),
        (["proj-1", "--to", "rt-old"], "project proj-1 already belongs to rt-old"),
        (["proj-1", "--to", "rt new"], "--to: runtime id may hold only"),
        (["proj 1", "--to", "rt-new"], "PROJECT_ID: project id may hold only"),
        (["proj-1"], "--to"),
    ],
)
def test_a_move_that_cannot_be_made_is_one_line_exit_2_and_changes_nothing(
    cli: Cli, hub_db: Path, argv: list[str], message: str
) -> None:
    image = hub_db.read_bytes()
    done = cli("hub", "move-project", *argv, "--hub-db", str(hub_db))
    assert done.code == 2
    assert done.err.startswith("error: ") and done.err.count("\n") == 1, done.err
    assert message in done.err
    assert hub_db.read_bytes() == image
    assert outcome_of(hub_db, "rt-old") == (Outcome.ACCEPTED, None)


def test_a_missing_hub_is_refused_without_creating_it(cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    done = cli("hub", "move-project", "proj-1", "--to", "rt-new", "--hub-db", str(missing))
    assert done.code == 2 and "hubsync hub migrate" in done.err
    assert not missing.exists()
