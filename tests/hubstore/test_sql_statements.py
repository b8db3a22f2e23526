"""The statements both SQL hub stores share (``hubstore.sql_statements``): one text per query,
the dialects differing in their placeholders only where the SQL is the same, and keyset paging
that yields every row once, in order, on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hubstore import hub_url_from_path, open_store
from hubstore import sql_statements as statements
from hubstore.pages import EventFilter, Page
from hubstore.postgres.sql import POSTGRES
from hubstore.sqlite.store import SQLITE
from hubstore.store import EventPosition, HubStore, RunPosition
from tests.helpers.relay_player import HUB_PROJECT, event_entry, sync_event

POSTGRES_MARK = "%s"


def as_postgres(query: statements.Query) -> statements.Query:
    text, args = query
    return text.replace("?", POSTGRES_MARK), args


POSITIONS: list[EventPosition | None] = [None, EventPosition("run-2", "proj-1", 7)]


@pytest.mark.parametrize("after", POSITIONS)
@pytest.mark.parametrize("run_id", [None, "run-2"])
@pytest.mark.parametrize("project_id", [None, "proj-1"])
def test_an_events_page_is_one_text_in_both_dialects(
    after: EventPosition | None, run_id: str | None, project_id: str | None
) -> None:
    page = Page(EventFilter("acme", project_id, run_id), after, 50)
    on_sqlite = statements.events_page(SQLITE, page)
    on_postgres = statements.events_page(POSTGRES, page)
    assert as_postgres(on_sqlite) == on_postgres
    text, args = on_sqlite
    assert text.count("?") == len(args)
    assert args[0] == "acme" and args[-1] == 50
    if after is None:
        assert ") > (" not in text
    else:
        assert "(run_id, project_id, sequence) > (?, ?, ?)" in text
        assert args[-4:-1] == list(after)
    assert text.endswith("ORDER BY run_id, project_id, sequence LIMIT ?")


def test_a_runs_page_differs_only_in_the_dialects_words() -> None:
    after = RunPosition("run-2", "proj-1")
    page = Page(EventFilter("acme", "proj-1"), after, 20)
    on_sqlite, sqlite_args = statements.runs_page(SQLITE, page, 4)
    on_postgres, postgres_args = statements.runs_page(POSTGRES, page, 4)
    keyset = "hub_project = ? AND project_id = ? AND (run_id, project_id) > (?, ?)"
    assert keyset in on_sqlite
    assert keyset.replace("?", POSTGRES_MARK) in on_postgres
    assert on_sqlite.count("?") == len(sqlite_args)
    assert on_postgres.count(POSTGRES_MARK) == len(postgres_args)
    # the same filters, position and limit; each dialect's gap limits after them
    assert sqlite_args == ["acme", "proj-1", "run-2", "proj-1", 20, 4]
    assert postgres_args == ["acme", "proj-1", "run-2", "proj-1", 20, 4, 4]


def test_the_other_shared_statements_differ_in_their_placeholders_only() -> None:
    pg = POSTGRES
    for query in (
        lambda d: statements.count_events(d, EventFilter("acme", run_id="run-1")),
        lambda d: statements.count_events(d, EventFilter()),
        lambda d: statements.presence(d, "acme"),
        lambda d: statements.alerts(d, None, 10),
    ):
        assert as_postgres(query(SQLITE)) == query(pg)
    for text in (statements.purge, statements.init_hub, statements.enrolled):
        assert str(text(SQLITE)).replace("?", POSTGRES_MARK) == str(text(pg))
    assert statements.upsert_enrolled(SQLITE).replace("?", POSTGRES_MARK) == (
        statements.upsert_enrolled(pg)
    )


def test_a_position_must_name_every_column_of_the_order() -> None:
    with pytest.raises(ValueError, match="has 3 values"):
        statements.keyset_where(SQLITE, (), statements.EVENT_ORDER, ("run-1", "proj-1"))


# ----- paging a real store -----

RUNS = ("run-1", "run-2", "run-3")
PROJECTS = ("proj-1", "proj-2")  # one run id in two projects: the position needs both


def fill(store: HubStore) -> list[EventPosition]:
    """Events of several runs, one run id in two projects, run-2 with holes; their order."""
    events = [
        sync_event(sequence, run_id=run, project_id=project)
        for run in RUNS
        for project in PROJECTS
        for sequence in range(1, 8)
        if not (run == "run-2" and sequence in (3, 5))
    ]
    store.ingest([event_entry(e) for e in reversed(events)])
    return sorted(EventPosition(e.run_id, e.project_id, e.sequence) for e in events)


def every_event(store: HubStore, limit: int, project_id: str | None = None) -> list[EventPosition]:
    seen: list[EventPosition] = []
    after: EventPosition | None = None
    while page := store.events(HUB_PROJECT, after=after, limit=limit, project_id=project_id):
        assert len(page) <= limit
        seen.extend(e.position for e in page)
        after = page[-1].position
    return seen


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HubStore]:
    """A new, empty store of each SQL backend."""
    url: str
    if request.param == "sqlite":
        url = hub_url_from_path(tmp_path / "hub.db")
    else:
        url = request.getfixturevalue("postgres_url")
    with open_store(url, create_schema=True) as store:
        yield store


@pytest.mark.parametrize("limit", [1, 3, 1000])
def test_paging_events_yields_every_row_once_in_order(sql_store: HubStore, limit: int) -> None:
    expected = fill(sql_store)
    assert every_event(sql_store, limit) == expected
    assert every_event(sql_store, limit, project_id="proj-2") == [
        p for p in expected if p.project_id == "proj-2"
    ]


@pytest.mark.parametrize("limit", [1, 2, 1000])
def test_paging_runs_yields_every_run_once_in_order(sql_store: HubStore, limit: int) -> None:
    fill(sql_store)
    seen: list[RunPosition] = []
    after: RunPosition | None = None
    while page := [r.position for r in sql_store.runs(HUB_PROJECT, after=after, limit=limit)]:
        assert len(page) <= limit
        seen.extend(page)
        after = page[-1]
    assert seen == sorted(RunPosition(r, p) for r in RUNS for p in PROJECTS)
    holed = [r for r in sql_store.runs(HUB_PROJECT) if r.run_id == "run-2"]
    assert [(r.gaps, r.sync_cursor, r.missing) for r in holed] == [(((3, 3), (5, 5)), 2, 2)] * 2
