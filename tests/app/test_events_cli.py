"""``hubsync events`` and ``hubsync runs``: the hub store read as JSON lines, paged by cursor."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hubstore import hub_url_from_path, open_store
from hubstore.store import EventPosition, RunPosition
from hubsync.cli.paging import decode_event_cursor, encode_cursor
from hubsync.core.canonical import canonical_json, content_hash
from hubsync.processes import child_environment
from tests.helpers.operator_support import error_lines, run_cli
from tests.helpers.relay_player import event_entry, sync_event

Capsys = pytest.CaptureFixture[str]

# Two projects share run ids (the case a position without the project skipped),
# one run has a gap, one payload holds characters some line splitters break at.
ROWS = [
    event_entry(sync_event(seq, run_id=run, project_id=project, data=data))
    for project, run, seq, data in (
        ("p1", "run-1", 1, None),
        ("p2", "run-1", 1, None),
        ("p1", "run-1", 2, {"note": "line\u2028separator\u0085nel, é"}),
        ("p2", "run-1", 2, None),
        ("p1", "run-1", 5, None),
        ("p1", "run-2", 1, None),
        ("p2", "run-3", 1, None),
    )
]
ORDER = sorted((e.event.run_id, e.event.project_id, e.event.sequence) for e in ROWS)


@pytest.fixture
def hub_db(tmp_path: Path) -> Path:
    path = tmp_path / "hub.db"
    with open_store(hub_url_from_path(path), create_schema=True) as store:
        store.ingest(ROWS)
        store.ingest([event_entry(sync_event(1, project_id="p9", hub_project="other"))])
    return path


def lines(out: str) -> list[dict[str, Any]]:
    """Each stdout line parsed on its own (split at newlines only, as JSON lines are)."""
    return [json.loads(line) for line in out.split("\n") if line]


def keys_of(rows: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    return [(r["run_id"], r["project_id"], r["sequence"]) for r in rows]


def test_events_are_json_lines_with_fields_record_and_position(
    capsys: Capsys, hub_db: Path
) -> None:
    code, out, err = run_cli(capsys, "events", "--hub-db", str(hub_db), "--hub-project", "acme")
    assert code == 0, err
    assert err == ""
    rows = lines(out)
    assert keys_of(rows) == ORDER
    # no character str.splitlines breaks at is left inside a line
    assert len(out.splitlines()) == len(ROWS)
    by_key = {e.key: e for e in ROWS}
    for row in rows:
        entry = by_key[(row["project_id"], row["run_id"], row["sequence"])]
        assert row["record"] == json.loads(entry.data)
        # the record is the stored canonical event: canonical again, it hashes as stored
        assert content_hash(canonical_json(row["record"])) == row["content_hash"]
        assert row["content_hash"] == entry.content_hash
        assert (row["hub_project"], row["home_runtime_id"]) == ("acme", "rt-1")
        assert row["event_type"] == "step.completed" and row["received_at"].endswith("Z")
        assert decode_event_cursor(row["position"]) == EventPosition(
            row["run_id"], row["project_id"], row["sequence"]
        )


@pytest.mark.parametrize("limit", [1, 2, 3, 7])
def test_paging_with_after_returns_every_event_once_in_order(
    capsys: Capsys, hub_db: Path, limit: int
) -> None:
    db = ["--hub-db", str(hub_db), "--hub-project", "acme"]
    seen: list[tuple[str, str, int]] = []
    after: list[str] = []
    for _ in range(len(ROWS) + 1):
        code, out, err = run_cli(capsys, "events", *db, "--limit", str(limit), *after)
        assert code == 0, err
        rows = lines(out)
        seen += keys_of(rows)
        if len(seen) == len(ROWS):
            assert err == ""  # the last page says nothing more remains
            break
        assert len(rows) == limit
        assert err.strip() == f"more events remain: resume with --after {rows[-1]['position']}"
        after = ["--after", rows[-1]["position"]]
    assert seen == ORDER


def test_the_json_document_pages_with_next_until_null(capsys: Capsys, hub_db: Path) -> None:
    db = ["--hub-db", str(hub_db), "--hub-project", "acme"]
    seen: list[tuple[str, str, int]] = []
    after: list[str] = []
    while True:
        code, out, err = run_cli(capsys, "events", *db, "--limit", "3", "--json", *after)
        assert code == 0, err
        document = json.loads(out)
        assert set(document) == {"events", "next"}
        seen += keys_of(document["events"])
        if document["next"] is None:
            break
        assert document["next"] == document["events"][-1]["position"]
        after = ["--after", document["next"]]
    assert seen == ORDER


def test_events_of_one_project_and_one_run(capsys: Capsys, hub_db: Path) -> None:
    db = ["--hub-db", str(hub_db), "--hub-project", "acme"]
    code, out, _ = run_cli(capsys, "events", *db, "--project-id", "p2")
    assert code == 0
    assert keys_of(lines(out)) == [k for k in ORDER if k[1] == "p2"]
    code, out, _ = run_cli(capsys, "events", *db, "--run", "run-1", "--project-id", "p1")
    assert keys_of(lines(out)) == [("run-1", "p1", 1), ("run-1", "p1", 2), ("run-1", "p1", 5)]
    code, out, _ = run_cli(capsys, "events", "--hub-db", str(hub_db), "--hub-project", "other")
    assert keys_of(lines(out)) == [("run-1", "p9", 1)]


def test_runs_list_counts_cursor_gaps_and_last_received(capsys: Capsys, hub_db: Path) -> None:
    code, out, err = run_cli(capsys, "runs", "--hub-db", str(hub_db), "--hub-project", "acme")
    assert code == 0, err
    rows = lines(out)
    assert [(r["run_id"], r["project_id"]) for r in rows] == [
        ("run-1", "p1"),
        ("run-1", "p2"),
        ("run-2", "p1"),
        ("run-3", "p2"),
    ]
    holed = rows[0]
    assert (holed["events"], holed["highest_sequence"], holed["sync_cursor"]) == (3, 5, 2)
    assert (holed["missing"], holed["gaps"]) == (2, [[3, 4]])
    assert holed["last_received_at"].endswith("Z")
    assert [(r["events"], r["sync_cursor"], r["gaps"]) for r in rows[1:]] == [
        (2, 2, []),
        (1, 1, []),
        (1, 1, []),
    ]


def test_runs_page_with_after_and_json_next(capsys: Capsys, hub_db: Path) -> None:
    db = ["--hub-db", str(hub_db), "--hub-project", "acme", "--limit", "3"]
    code, out, err = run_cli(capsys, "runs", *db)
    first = lines(out)
    assert code == 0 and len(first) == 3
    assert err.strip() == f"more runs remain: resume with --after {first[-1]['position']}"
    code, out, err = run_cli(capsys, "runs", *db, "--after", first[-1]["position"], "--json")
    document = json.loads(out)
    assert code == 0 and err == ""
    assert [(r["run_id"], r["project_id"]) for r in document["runs"]] == [("run-3", "p2")]
    assert document["next"] is None


@pytest.mark.parametrize(
    "cursor",
    [
        "bogus!",
        "not base64 at all",
        "WyJldmVudHMiXQ",  # ["events"]: no position
        encode_cursor("runs", RunPosition("run-1", "p1")),  # a cursor of the other listing
        "eyJhIjoxfQ",  # {"a":1}
        "WyJldmVudHMiLCJydW4tMSIsInAxIiwwXQ",  # sequence 0
        "WyJldmVudHMiLCJydW4tMSIsInAxIix0cnVlXQ",  # sequence true
        "A" * 5000,
    ],
)
def test_a_malformed_cursor_is_a_usage_error_in_one_line(
    capsys: Capsys, hub_db: Path, cursor: str
) -> None:
    code, out, err = run_cli(
        capsys, "events", "--hub-db", str(hub_db), "--hub-project", "acme", "--after", cursor
    )
    assert code == 2
    assert out == ""
    [line] = error_lines(err)
    assert line.startswith("error: --after: not a cursor of `hubsync events`")
    assert cursor not in err


def test_an_events_cursor_is_not_a_runs_cursor(capsys: Capsys, hub_db: Path) -> None:
    cursor = encode_cursor("events", EventPosition("run-1", "p1", 1))
    code, _, err = run_cli(
        capsys, "runs", "--hub-db", str(hub_db), "--hub-project", "acme", "--after", cursor
    )
    assert code == 2
    assert error_lines(err) == [
        "error: --after: not a cursor of `hubsync runs`; pass a `position` (or the `next` of "
        "--json) that `hubsync runs` printed"
    ]


@pytest.mark.parametrize("command", ["events", "runs"])
def test_a_missing_hub_store_is_refused_and_never_created(
    capsys: Capsys, tmp_path: Path, command: str
) -> None:
    missing = tmp_path / "nope.db"
    code, out, err = run_cli(capsys, command, "--hub-db", str(missing), "--hub-project", "acme")
    assert (code, out) == (2, "")
    [line] = error_lines(err)
    assert "no hub database" in line and "hubsync consume" in line
    assert not missing.exists()


@pytest.mark.parametrize("argv", [["--limit", "0"], ["--limit", "10001"], ["--run", "a b"]])
def test_bad_paging_options_are_usage_errors(capsys: Capsys, hub_db: Path, argv: list[str]) -> None:
    code, _, err = run_cli(
        capsys, "events", "--hub-db", str(hub_db), "--hub-project", "acme", *argv
    )
    assert code == 2
    [line] = error_lines(err)
    assert line.startswith(f"error: {argv[0]}:")


def test_the_memory_backend_reads_as_an_empty_hub(capsys: Capsys) -> None:
    for command in ("events", "runs"):
        code, out, err = run_cli(capsys, command, "--hub-url", "memory://", "--hub-project", "a")
        assert (code, out, err) == (0, "", "")
        code, out, _ = run_cli(
            capsys, command, "--hub-url", "memory://", "--hub-project", "a", "--json"
        )
        assert json.loads(out) == {command: [], "next": None}


def jq(*args: str, stdin: str) -> str:
    """What ``jq ARGS`` prints for ``stdin``."""
    done = subprocess.run(
        ["jq", *args],
        input=stdin.encode("utf-8"),
        capture_output=True,
        check=True,
        env=child_environment(),
    )
    return done.stdout.decode("utf-8")


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
@pytest.mark.parametrize("command", ["events", "runs"])
def test_the_output_round_trips_through_jq(capsys: Capsys, hub_db: Path, command: str) -> None:
    db = ["--hub-db", str(hub_db), "--hub-project", "acme"]
    code, out, err = run_cli(capsys, command, *db)
    assert code == 0, err
    assert lines(jq("-c", ".", stdin=out)) == lines(out)
    code, out, err = run_cli(capsys, command, *db, "--json", "--limit", "2")
    assert code == 0, err
    assert jq("-r", ".next", stdin=out).strip() == json.loads(out)["next"]
    assert json.loads(jq("-c", ".", stdin=out)) == json.loads(out)
