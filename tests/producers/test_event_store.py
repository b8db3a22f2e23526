"""The runtime event store: sequences, one transaction per append, no secret on disk."""

from __future__ import annotations

import json
import sqlite3
import string
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hubsync.core.entries import decode_fields, parse_event_entry, raw_event_entry_fields
from hubsync.core.errors import ConfigError, SchemaVersionError, WireError
from hubsync.core.wire import MAX_EVENT_BYTES, parse_sync_event
from producers.derivation import HUB_MAX_NESTING, StoreIdentity
from producers.errors import (
    DerivationError,
    EventTooLargeError,
    RebindError,
    SecretInIdError,
    StoreClosedError,
)
from producers.redaction import Redactor
from producers.store.event_store import (
    EVENT_STORE_SCHEMA_VERSION,
    NewEvent,
    RunEventStore,
    open_store_file,
)
from tests.helpers.support import REPO_ROOT, start_python

IDENTITY = StoreIdentity("proj-1", "acme", "rt-host-0001")
REPO = REPO_ROOT


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunEventStore]:
    with RunEventStore(tmp_path / "store.sqlite", IDENTITY, environ={}) as opened:
        yield opened


def table_counts(path: Path) -> tuple[int, int]:
    with sqlite3.connect(path) as connection:
        events = connection.execute("SELECT count(*) FROM run_events").fetchone()[0]
        outbox = connection.execute("SELECT count(*) FROM outbox").fetchone()[0]
    connection.close()
    return events, outbox


def test_appends_across_runs_get_contiguous_sequences_and_one_outbox_row_each(
    store: RunEventStore,
) -> None:
    appended = [store.append_event(f"run-{i % 3}", "step.started", {"i": i}) for i in range(30)]
    for run in ("run-0", "run-1", "run-2"):
        assert [a.sequence for a in appended if a.run_id == run] == list(range(1, 11))
        assert [e.sequence for e in store.events(run)] == list(range(1, 11))
        assert [r.sequence for r in store.outbox_for_run(run)] == list(range(1, 11))
    assert [a.outbox_seq for a in appended] == list(range(1, 31))
    assert table_counts(store.path) == (30, 30)
    assert store.outbox_counts()["total"] == 30


def test_the_outbox_row_holds_the_derived_event_and_its_hash(store: RunEventStore) -> None:
    appended = store.append_event(
        "run-1",
        "step.completed",
        {"step_id": "s1", "status": "ok", "internal": {"host": "box-17"}},
        occurred_at="2026-11-29T16:38:54.123456+00:00",
    )
    [row] = store.outbox_for_run("run-1")
    event = parse_sync_event(row.sync_event, row.content_hash)
    assert row.content_hash == appended.content_hash
    assert (event.project_id, event.hub_project, event.home_runtime_id) == (
        "proj-1",
        "acme",
        "rt-host-0001",
    )
    assert (event.run_id, event.sequence, event.event_type) == ("run-1", 1, "step.completed")
    assert event.data == {"step_id": "s1", "status": "ok"}
    assert b"box-17" not in row.sync_event
    [local] = store.events("run-1")
    assert json.loads(local.payload)["internal"] == {"host": "box-17"}


def test_batch_append_is_one_transaction_with_contiguous_sequences(store: RunEventStore) -> None:
    store.append_event("run-a", "step.started", {})
    appended = store.append_events(
        [NewEvent("run-a", "step.completed", {}), ("run-b", "run.started", {}, None)]
        + [NewEvent("run-a", "step.started", {"n": n}) for n in range(3)]
    )
    assert [(a.run_id, a.sequence) for a in appended] == [
        ("run-a", 2),
        ("run-b", 1),
        ("run-a", 3),
        ("run-a", 4),
        ("run-a", 5),
    ]
    assert [a.outbox_seq for a in appended] == [2, 3, 4, 5, 6]
    assert store.append_events([]) == []


def test_a_failure_inside_the_batch_transaction_leaves_both_tables_as_they_were(
    store: RunEventStore,
) -> None:
    store.append_event("run-1", "run.started", {})
    before = table_counts(store.path)
    too_large = {"summary": "x" * MAX_EVENT_BYTES}
    with pytest.raises(EventTooLargeError):
        store.append_events(
            [
                NewEvent("run-1", "step.started", {}),
                NewEvent("run-2", "run.started", {}),
                NewEvent("run-1", "run.completed", too_large),  # fails after two inserts
            ]
        )
    assert table_counts(store.path) == before
    assert store.last_sequence("run-1") == 1
    assert store.run_ids() == ["run-1"]
    after = store.append_event("run-1", "step.started", {})
    assert (after.sequence, after.outbox_seq) == (2, 2)


def test_a_failing_single_append_writes_nothing(store: RunEventStore) -> None:
    with pytest.raises(EventTooLargeError):
        store.append_event("run-1", "run.completed", {"summary": "y" * MAX_EVENT_BYTES})
    with pytest.raises(DerivationError):
        store.append_event("run-1", "run.started", {"x": float("inf")})
    assert table_counts(store.path) == (0, 0)
    assert store.append_event("run-1", "run.started", {}).sequence == 1


def test_a_bad_event_in_a_batch_fails_the_whole_batch_before_writing(
    store: RunEventStore,
) -> None:
    with pytest.raises(DerivationError):
        store.append_events(
            [NewEvent("run-1", "run.started", {}), NewEvent("bad id!", "run.started", {})]
        )
    assert table_counts(store.path) == (0, 0)


ENV_ID_SECRET = "run-env-secret-4242"
REGISTERED_ID_SECRET = "run-registered-secret-77"


@pytest.mark.parametrize(
    ("run_id", "event_type", "secret"),
    [
        ("ghp_" + "Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed8Cb7", "run.started", "ghp_"),
        ("run-1", "xoxb-123456789012-abcdefabcdef", "xoxb-"),
        (ENV_ID_SECRET, "run.started", ENV_ID_SECRET),
        (f"deploy/{REGISTERED_ID_SECRET}", "run.started", REGISTERED_ID_SECRET),
    ],
)
def test_an_id_or_event_type_holding_a_secret_is_refused_and_never_written(
    tmp_path: Path, run_id: str, event_type: str, secret: str
) -> None:
    path = tmp_path / "s.sqlite"
    with RunEventStore(path, IDENTITY, environ={"CI_DEPLOY_PASS": ENV_ID_SECRET}) as opened:
        opened.redactor.register(REGISTERED_ID_SECRET)
        with pytest.raises(SecretInIdError) as info:
            opened.append_event(run_id, event_type, {})
        with pytest.raises(SecretInIdError):
            opened.append_events([NewEvent("run-ok", "run.started", {}), (run_id, event_type, {})])
        assert table_counts(path) == (0, 0)
        opened.append_event("run-ok", "run.started", {})  # only the secret is refused
        on_disk = _files_bytes(tmp_path)
    assert secret not in str(info.value)
    assert ("run id" if run_id != "run-1" else "event type") in str(info.value)
    assert table_counts(path) == (1, 1)
    assert secret.encode() not in on_disk


def _nested(depth: int) -> dict[str, object]:
    deep: dict[str, object] = {}
    for _ in range(depth - 1):
        deep = {"a": deep}
    return deep


@pytest.mark.parametrize("depth", [300, 100_000])
def test_a_payload_nested_deeper_than_the_hub_accepts_is_refused_and_nothing_written(
    store: RunEventStore, depth: int
) -> None:
    with pytest.raises(DerivationError) as info:
        store.append_event("run-1", "run.completed", {"outputs": _nested(depth)})
    assert "nested too deeply" in str(info.value) or "refused by the hub" in str(info.value)
    assert table_counts(store.path) == (0, 0)
    assert store.append_event("run-1", "run.completed", {}).sequence == 1


def _nested_list(levels: int) -> object:
    # `levels` non-empty arrays, one inside the other, around a number.
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize("extra", [0, 1])
def test_the_runtime_refuses_exactly_the_nesting_the_hub_refuses(
    store: RunEventStore, extra: int
) -> None:
    # The event object and `data` take two levels of the hub's limit.
    outputs = _nested_list(HUB_MAX_NESTING - 2 + extra)
    wire = json.dumps(
        {
            "schema": "hubsync.sync-event.v1",
            "project_id": IDENTITY.project_id,
            "hub_project": IDENTITY.hub_project,
            "home_runtime_id": IDENTITY.home_runtime_id,
            "run_id": "run-1",
            "sequence": 1,
            "event_type": "run.completed",
            "occurred_at": "2024-01-01T00:00:00.000000Z",
            "data": {"outputs": outputs},
        },
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    if extra:
        with pytest.raises(WireError):
            parse_sync_event(wire)
        with pytest.raises(DerivationError, match="refused by the hub"):
            store.append_event("run-1", "run.completed", {"outputs": outputs})
        assert table_counts(store.path) == (0, 0)
    else:
        parse_sync_event(wire)
        store.append_event("run-1", "run.completed", {"outputs": outputs})
        [row] = store.outbox_for_run("run-1")
        assert parse_sync_event(row.sync_event).data == {"outputs": outputs}


def test_object_keys_that_are_not_strings_are_kept_only_where_the_hub_takes_them(
    store: RunEventStore,
) -> None:
    store.append_event("run-1", "run.completed", {"outputs": {1: "one"}})
    [row] = store.outbox_for_run("run-1")
    assert parse_sync_event(row.sync_event).data == {"outputs": {"1": "one"}}
    # Sorted as numbers, 9 comes before 10; as the strings the hub reads, after.
    with pytest.raises(DerivationError, match="refused by the hub"):
        store.append_event("run-1", "run.completed", {"outputs": {10: "ten", 9: "nine"}})
    assert table_counts(store.path) == (1, 1)


def test_a_nested_payload_the_runtime_accepts_the_hub_accepts(store: RunEventStore) -> None:
    store.append_event("run-1", "run.completed", {"outputs": _nested(150)})
    [row] = store.outbox_for_run("run-1")
    fields = raw_event_entry_fields(
        project_id=IDENTITY.project_id,
        hub_project=IDENTITY.hub_project,
        run_id="run-1",
        sequence=1,
        event_type="run.completed",
        runtime_id=IDENTITY.home_runtime_id,
        digest=row.content_hash,
        data=row.sync_event,
    )
    entry = parse_event_entry(decode_fields(fields))  # the hub's parse of a stream entry
    assert entry.event.data == {"outputs": _nested(150)}


def test_environment_secrets_are_registered_when_the_store_opens(tmp_path: Path) -> None:
    environ = {"CI_JOB_TOKEN": "job-token-0123456789", "PATH": "/usr/bin"}
    with RunEventStore(tmp_path / "s.sqlite", IDENTITY, environ=environ) as opened:
        opened.append_event("run-1", "step.completed", {"outputs": {"t": "job-token-0123456789"}})
        [row] = opened.outbox_for_run("run-1")
        [local] = opened.events("run-1")
    assert b"job-token-0123456789" not in row.sync_event
    assert b"[REDACTED:env]" in row.sync_event
    assert "job-token-0123456789" not in local.payload


def test_reopening_with_the_same_identity_keeps_the_data(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with RunEventStore(path, IDENTITY, environ={}) as first:
        first.append_event("run-1", "run.started", {})
    with RunEventStore(path, IDENTITY, environ={}) as again:
        assert again.append_event("run-1", "step.started", {}).sequence == 2
    with open_store_file(path, environ={}) as adopted:
        assert adopted.identity == IDENTITY


def test_opening_a_store_as_another_project_or_home_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    RunEventStore(path, IDENTITY, environ={}).close()
    for other in (
        StoreIdentity("proj-2", "acme", "rt-host-0001"),
        StoreIdentity("proj-1", "other", "rt-host-0001"),
        StoreIdentity("proj-1", "acme", "rt-elsewhere"),
    ):
        with pytest.raises(RebindError, match="belongs to project proj-1"):
            RunEventStore(path, other, environ={})


def test_a_new_store_needs_an_identity(tmp_path: Path) -> None:
    with pytest.raises(RebindError, match="new event store"):
        open_store_file(tmp_path / "fresh.sqlite", environ={})


def test_a_store_of_a_newer_schema_version_is_refused_and_left_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    RunEventStore(path, IDENTITY, environ={}).close()
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA user_version = 99")
    connection.close()
    with pytest.raises(SchemaVersionError) as info:
        RunEventStore(path, IDENTITY, environ={})
    assert "version 99, newer" in str(info.value)
    assert f"up to version {EVENT_STORE_SCHEMA_VERSION}" in str(info.value)
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 99
    connection.close()


def test_a_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE mine (x)")
    connection.close()
    with pytest.raises(SchemaVersionError, match="not a hubsync event store"):
        RunEventStore(path, IDENTITY, environ={})


def test_a_closed_store_refuses_appends(tmp_path: Path) -> None:
    opened = RunEventStore(tmp_path / "s.sqlite", IDENTITY, environ={})
    opened.close()
    opened.close()
    with pytest.raises(StoreClosedError):
        opened.append_event("run-1", "run.started", {})


def test_store_files_are_private_to_their_owner(store: RunEventStore) -> None:
    store.append_event("run-1", "run.started", {})
    assert store.path.stat().st_mode & 0o077 == 0


def test_two_processes_appending_concurrently_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    RunEventStore(path, IDENTITY, environ={}).close()
    go = tmp_path / "go"
    runs, events = 3, 60
    # A zero busy timeout makes SQLite report every lock at once, so the store's
    # own retry (not SQLite's busy handler) is what keeps the callers unaware.
    workers = [
        start_python(
            str(REPO / "tests" / "helpers" / "append_worker.py"),
            str(path),
            str(go),
            name,
            str(runs),
            str(events),
            "0",
        )
        for name in ("w1", "w2")
    ]
    go.touch()
    results = [worker.communicate(timeout=120) for worker in workers]
    for worker, (_, err) in zip(workers, results, strict=True):
        assert worker.returncode == 0, err
        assert "locked" not in err
    given = [tuple(pair) for out, _ in results for pair in json.loads(out)]
    assert len(given) == 2 * runs * events
    assert len(set(given)) == len(given), "a (run, sequence) was handed out twice"
    with open_store_file(path, environ={}) as check:
        for run in range(runs):
            run_id = f"run-{run}"
            expected = list(range(1, 2 * events + 1))
            assert [e.sequence for e in check.events(run_id, limit=10_000)] == expected
            rows = check.outbox_for_run(run_id)
            assert [r.sequence for r in rows] == expected
            for row in rows:
                assert parse_sync_event(row.sync_event, row.content_hash).sequence == row.sequence
            by_worker = Counter(json.loads(e.payload)["by"] for e in check.events(run_id))
            assert by_worker == {"w1": events, "w2": events}
        assert check.outbox_counts()["total"] == 2 * runs * events


# --- no secret reaches any byte of the SQLite files ------------------------------------

_ALNUM = string.ascii_letters + string.digits
_token = st.text(_ALNUM, min_size=12, max_size=20)
_around = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6)


@st.composite
def planted(draw: st.DrawFn) -> tuple[list[str], list[str], str, str]:
    """(texts to plant, substrings that must never be stored, registered, env value)."""
    registered = "reg-" + draw(_token)
    env = "env-" + draw(_token)
    github = "ghp_" + draw(st.text(_ALNUM, min_size=36, max_size=40))
    aws = "AKIA" + draw(st.text(string.ascii_uppercase + string.digits, min_size=16, max_size=16))
    slack = "xoxb-" + draw(st.text(_ALNUM + "-", min_size=12, max_size=24))
    jwt = "eyJ" + draw(_token) + ".eyJ" + draw(_token) + "." + draw(_token)
    pem_body = draw(st.text(_ALNUM + "+/", min_size=24, max_size=48))
    pem = f"-----BEGIN EC PRIVATE KEY-----\n{pem_body}\n-----END EC PRIVATE KEY-----"
    userinfo = f"{draw(_token)}:{draw(_token)}"
    url = f"https://{userinfo}@git.example.com/repo.git"
    texts = [registered, env, github, aws, slack, jwt, pem, url]
    forbidden = [registered, env, github, aws, slack, jwt, pem_body, userinfo]
    return texts, forbidden, registered, env


def _leaf_with(texts: list[str]) -> st.SearchStrategy[str]:
    return st.builds(lambda a, s, b: a + s + b, _around, st.sampled_from(texts), _around)


def _tree(texts: list[str]) -> st.SearchStrategy[object]:
    leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=8) | _leaf_with(texts)
    key = st.text(max_size=6) | _leaf_with(texts)
    return st.recursive(
        leaf,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(key, inner, max_size=3),
        max_leaves=10,
    )


def _files_bytes(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_no_planted_secret_reaches_any_byte_of_the_sqlite_files(data: st.DataObject) -> None:
    texts, forbidden, registered, env = data.draw(planted())
    trees = data.draw(st.lists(_tree(texts), min_size=1, max_size=3))
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        opened = RunEventStore(directory / "s.sqlite", IDENTITY, environ={"PLANTED_API_KEY": env})
        opened.redactor.register(registered)
        for tree in trees:
            # Each text in an allowlisted value and key (crosses whole), and local-only.
            payload = {
                "step_id": " ".join(texts),
                "outputs": {text: text for text in texts} | {"tree": tree},
                "local_only": {text: [text, tree] for text in texts},
            }
            opened.append_event("run-1", "step.completed", payload)
            opened.append_events([NewEvent("run-2", "run.completed", payload)] * 2)
        # Scanned while open, so the WAL (where fresh commits live) is included.
        assert any(p.name.endswith("-wal") for p in directory.iterdir())
        on_disk = _files_bytes(directory)
        rows = opened.outbox_for_run("run-1")
        opened.close()
        after_close = _files_bytes(directory)
    assert b"[REDACTED:" in rows[0].sync_event
    for secret in forbidden:
        needle = secret.encode()
        assert needle not in on_disk
        assert needle not in after_close


def test_the_project_root_goes_to_the_stores_own_redactor_never_beside_a_shared_one(
    tmp_path: Path,
) -> None:
    with RunEventStore(tmp_path / "a.db", IDENTITY, environ={}, project_root=tmp_path) as store:
        assert store.redactor.project_root == str(tmp_path)
    with pytest.raises(ConfigError, match="Redactor\\(project_root"):
        RunEventStore(
            tmp_path / "b.db", IDENTITY, environ={}, redactor=Redactor(), project_root=tmp_path
        )
    assert not (tmp_path / "b.db").exists()
