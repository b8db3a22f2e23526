"""PostgreSQL specifics of the hub store: URLs, the pool, schema versions and migrate, a role
without DDL rights, and ingest racing other writers' uncommitted rows. The backend-neutral
behaviour is in test_hubstore_contract.py; several processes at once in
test_postgres_concurrent_ingest.py."""

from __future__ import annotations

import json
import logging
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import psycopg
import pytest
import redis

from hubstore import migrate_store, open_store
from hubstore.errors import StoreError, StoreOpenError
from hubstore.factory import shown_url
from hubstore.postgres import sql
from hubstore.postgres.schema import SCHEMA_VERSION
from hubstore.postgres.store import PostgresHubStore, lookup_arguments
from hubstore.store import HubStore
from hubsync.core.entries import ConflictReason, Outcome
from hubsync.core.errors import ConfigError, SchemaVersionError
from hubsync.processes import child_environment, run_hubsync
from tests.contract.postgres_writers import ingested_after, insert_uncommitted
from tests.helpers.operator_support import run_cli
from tests.helpers.postgres_races import Ingesting, blocked_sessions
from tests.helpers.postgres_server import PostgresCluster
from tests.helpers.relay_player import event_entry, send, sync_event
from tests.helpers.support import REPO_ROOT, start_python, wait_until
from tests.helpers.trust import enroll


def password_of(url: str) -> str:
    password = urlsplit(url).password
    assert password
    return unquote(password)


def database_of(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def tables(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
        ).fetchall()
    return [str(r[0]) for r in rows]


@pytest.fixture
def store(postgres_url: str) -> Iterator[HubStore]:
    with open_store(postgres_url, create_schema=True) as store:
        yield store


# ----- URLs and the pool -----


def test_both_schemes_name_the_same_store(postgres_url: str) -> None:
    with open_store(postgres_url, create_schema=True) as store:
        assert isinstance(store, PostgresHubStore)
        store.ingest([event_entry(sync_event(1))])
    other = postgres_url.replace("postgresql://", "postgres://", 1)
    with open_store(other, create_schema=False) as store:
        assert store.ingest([event_entry(sync_event(1))])[0].outcome is Outcome.DUPLICATE


def test_the_pool_size_comes_from_the_url_and_threads_share_the_pool(postgres_url: str) -> None:
    with open_store(postgres_url + "?pool_size=2", create_schema=True) as store:
        assert isinstance(store, PostgresHubStore)
        assert store.target.pool_size == 2
        assert "pool_size" not in store.target.conninfo
        errors: list[BaseException] = []

        def ingest(worker: int) -> None:
            try:
                for round_ in range(10):
                    store.ingest(
                        [
                            event_entry(sync_event(s, run_id=f"run-{worker}-{round_}"))
                            for s in range(1, 6)
                        ]
                    )
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=ingest, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        assert store.count_events() == 6 * 10 * 5


@pytest.mark.parametrize("size", ["0", "101", "two", ""])
def test_a_bad_pool_size_is_a_config_error_showing_no_password(
    postgres_url: str, size: str
) -> None:
    with pytest.raises(ConfigError, match="pool_size") as raised:
        open_store(f"{postgres_url}?pool_size={size}", create_schema=True)
    assert password_of(postgres_url) not in str(raised.value)
    assert ":***@" in str(raised.value)


def test_an_unknown_parameter_is_a_config_error_showing_no_password(postgres_url: str) -> None:
    with pytest.raises(ConfigError, match="not a valid PostgreSQL URL") as raised:
        open_store(postgres_url + "?no_such_parameter=1", create_schema=True)
    assert password_of(postgres_url) not in str(raised.value)


def test_a_wrong_password_is_refused_without_showing_either_password(postgres_url: str) -> None:
    wrong = postgres_url.replace(password_of(postgres_url), "Wrong-Secret-4711", 1)
    for create in (True, False):
        with pytest.raises(StoreOpenError, match="cannot connect") as raised:
            open_store(wrong, create_schema=create)
        assert "Wrong-Secret-4711" not in str(raised.value)
        assert ":***@" in str(raised.value)
    with pytest.raises(StoreOpenError):
        migrate_store(wrong)


def test_a_password_given_as_a_parameter_is_masked_too(postgres_url: str) -> None:
    parts = urlsplit(postgres_url)
    bare = parts._replace(netloc=f"{parts.username}@{parts.hostname}:{parts.port}").geturl()
    with pytest.raises(StoreOpenError) as raised:
        open_store(f"{bare}?password=Wrong-Secret-4711", create_schema=False)
    assert "Wrong-Secret-4711" not in str(raised.value)
    assert "password=***" in str(raised.value)


def test_a_unix_socket_url_has_no_host(postgres_server: PostgresCluster, postgres_url: str) -> None:
    if postgres_server.directory is None:
        pytest.skip("the socket of a server given by HUBSYNC_TEST_POSTGRES_URL is not known here")
    socket_dir = quote(str(postgres_server.directory), safe="")
    port = urlsplit(postgres_url).port
    url = f"postgresql:///{database_of(postgres_url)}?host={socket_dir}&port={port}&user=hubsync"
    assert migrate_store(url).action == "created"
    with open_store(url, create_schema=False) as store:
        assert store.ingest([event_entry(sync_event(1))])[0].outcome is Outcome.ACCEPTED
    assert tables(postgres_url) != []


def test_urls_are_shown_with_every_password_masked_and_otherwise_unchanged() -> None:
    assert shown_url("sqlite:////var/lib/hub.db") == "sqlite:////var/lib/hub.db"
    assert shown_url("postgresql:///hub?host=/run/pg") == "postgresql:///hub?host=/run/pg"
    shown = shown_url("postgresql://app:s3cret@db:5432/hub?sslmode=require&password=other")
    assert shown == "postgresql://app:***@db:5432/hub?sslmode=require&password=***"
    assert shown_url("postgres://app@db/hub") == "postgres://app@db/hub"


def test_sqlite_and_memory_stores_never_import_the_postgresql_driver(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from hubstore import open_store, hub_url_from_path\n"
        "open_store('memory://', create_schema=True).close()\n"
        f"open_store(hub_url_from_path({str(tmp_path / 'hub.db')!r}), create_schema=True).close()\n"
        "assert not [m for m in sys.modules if m.startswith('psycopg')], sorted(sys.modules)\n"
    )
    subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        check=True,
        timeout=60,
        env=child_environment(),
    )


# ----- schema versions and migrate -----


def test_opening_without_creating_refuses_an_empty_database_and_creates_nothing(
    postgres_url: str,
) -> None:
    with pytest.raises(SchemaVersionError, match="no hubsync hub schema") as raised:
        open_store(postgres_url, create_schema=False)
    message = str(raised.value)
    assert "run `hubsync hub migrate --hub-url 'postgresql://hubsync:***@" in message
    assert password_of(postgres_url) not in message
    assert tables(postgres_url) == []


def test_migrate_creates_the_schema_then_finds_it_current(postgres_url: str) -> None:
    change = migrate_store(postgres_url)
    assert (change.action, change.from_version, change.to_version) == ("created", 0, SCHEMA_VERSION)
    assert change.backup is None
    assert migrate_store(postgres_url).action == "current"
    assert "sync_events" in tables(postgres_url)
    with open_store(postgres_url, create_schema=False) as store:
        assert store.count_events() == 0
    with psycopg.connect(postgres_url) as conn:
        versions = conn.execute("SELECT version, summary FROM hub_schema_versions").fetchall()
    assert versions == [(SCHEMA_VERSION, "created")]


def test_two_processes_migrating_at_once_leave_one_schema(postgres_url: str) -> None:
    script = (
        "import sys; from hubstore import migrate_store; print(migrate_store(sys.argv[1]).action)"
    )
    procs = [start_python("-c", script, postgres_url) for _ in range(3)]
    results = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in results]
    assert sorted(out.strip() for out, _ in results) == ["created", "current", "current"]


def test_the_cli_migrates_and_initialises_and_never_prints_the_password(
    capsys: pytest.CaptureFixture[str], postgres_url: str
) -> None:
    result = run_cli(capsys, "hub", "migrate", "--hub-url", postgres_url, "--json")
    assert result.code == 0, result.err
    document = json.loads(result.out)
    assert (document["action"], document["to_version"], document["backup"]) == (
        "created",
        SCHEMA_VERSION,
        None,
    )
    assert document["store"].startswith("postgresql://hubsync:***@127.0.0.1:")
    again = run_cli(capsys, "hub", "migrate", env={"HUBSYNC_HUB_URL": postgres_url})
    assert again.code == 0, again.err
    assert f"already at schema version {SCHEMA_VERSION}" in again.out
    init = run_cli(capsys, "hub", "init", "--hub-url", postgres_url)
    assert init.code == 0, init.err
    assert "hub id hub-" in init.out
    for run in (result, again, init):
        assert password_of(postgres_url) not in run.out + run.err


def test_reading_commands_refuse_a_database_without_the_schema(
    capsys: pytest.CaptureFixture[str], postgres_url: str
) -> None:
    result = run_cli(capsys, "events", "--hub-url", postgres_url, "--hub-project", "acme")
    assert result.code == 2
    assert "hubsync hub migrate --hub-url" in result.err
    assert password_of(postgres_url) not in result.err
    assert tables(postgres_url) == []


def test_a_newer_schema_version_is_refused_and_left_untouched(postgres_url: str) -> None:
    migrate_store(postgres_url)
    with psycopg.connect(postgres_url) as conn:
        conn.execute("INSERT INTO hub_schema_versions (version, summary) VALUES (99, 'later')")
    for create in (True, False):
        with pytest.raises(SchemaVersionError, match="version 99, newer than this hubsync"):
            open_store(postgres_url, create_schema=create)
    with pytest.raises(SchemaVersionError, match="version 99"):
        migrate_store(postgres_url)
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT max(version) FROM hub_schema_versions").fetchone() == (99,)


def test_tables_of_another_application_named_as_ours_are_refused(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        conn.execute("CREATE TABLE sync_events (invoice integer)")
    for create in (True, False):
        with pytest.raises(SchemaVersionError, match=r"not a hubsync hub store"):
            open_store(postgres_url, create_schema=create)
    assert tables(postgres_url) == ["sync_events"]


def test_a_store_in_a_schema_of_its_own(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        conn.execute("CREATE SCHEMA hub")
    url = postgres_url + "?options=-csearch_path%3Dhub"
    assert migrate_store(url).action == "created"
    with open_store(url, create_schema=False) as store:
        store.ingest([event_entry(sync_event(1))])
    assert tables(postgres_url) == []  # nothing in public
    with pytest.raises(SchemaVersionError):
        open_store(postgres_url, create_schema=False)


# ----- a role that may only read and write rows -----


@pytest.fixture
def app_role_url(postgres_server: PostgresCluster, postgres_url: str) -> Iterator[str]:
    """The URL of ``postgres_url``'s database as a new role without DDL rights."""
    role = f"hubsync_app_{secrets.token_hex(4)}"
    password = secrets.token_urlsafe(12)
    database = database_of(postgres_url)
    with postgres_server.admin(database) as conn:
        try:
            conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        except psycopg.errors.InsufficientPrivilege:
            pytest.skip("the test server's role may not create roles")
    parts = urlsplit(postgres_url)
    yield parts._replace(netloc=f"{role}:{password}@{parts.hostname}:{parts.port}").geturl()
    with postgres_server.admin(database) as conn:
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE {role}")


def test_once_migrated_a_role_without_ddl_rights_runs_the_whole_store(
    postgres_server: PostgresCluster, postgres_url: str, app_role_url: str
) -> None:
    with pytest.raises(StoreError, match="permission denied"):
        migrate_store(app_role_url)
    assert tables(postgres_url) == []
    migrate_store(postgres_url)  # as the owner
    role = urlsplit(app_role_url).username
    with postgres_server.admin(database_of(postgres_url)) as conn:
        conn.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}"
        )
        conn.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}")
    # what `hubsync consume` does: open with create_schema=True, finding it current
    with open_store(app_role_url, create_schema=True) as store:
        original = event_entry(sync_event(1))
        store.ingest([original, event_entry(sync_event(2))])
        [forged] = store.ingest([event_entry(sync_event(1, data={"x": 1}))])
        assert forged.outcome is Outcome.CONFLICT
        assert store.alerts()[0].existing_hash == original.content_hash
        store.init_hub()
        store.enroll("rt-a", ["acme"])
        assert store.move_project("proj-1", "rt-a").runs == 1
        store.revoke("rt-a")
        assert store.purge(retention=timedelta(days=1)).alerts == 0
        assert store.count_events() == 2


# ----- ingest racing other writers -----


@pytest.mark.parametrize("other_commits", [True, False])
def test_a_key_another_writer_holds_uncommitted_is_judged_once_that_writer_ends(
    store: HubStore, postgres_url: str, other_commits: bool
) -> None:
    original = event_entry(sync_event(1))
    forged = event_entry(sync_event(1, data={"step_id": "evil"}))
    with psycopg.connect(postgres_url) as other:
        insert_uncommitted(other, original)
        ingesting = Ingesting(store, [forged])
        wait_until(lambda: blocked_sessions(postgres_url) == 1, what="ingest waiting on the key")
        if other_commits:
            other.commit()
        else:
            other.rollback()
    [outcome] = ingesting.result()
    [stored] = store.events("acme")
    if other_commits:
        assert outcome.outcome is Outcome.CONFLICT  # type: ignore[attr-defined]
        assert outcome.reason == ConflictReason.SEQUENCE_REUSED  # type: ignore[attr-defined]
        assert outcome.existing_hash == original.content_hash  # type: ignore[attr-defined]
        assert stored.record == original.data
        [alert] = store.alerts()
        assert alert.offered_hash == forged.content_hash
    else:
        assert outcome.outcome is Outcome.ACCEPTED  # type: ignore[attr-defined]
        assert stored.record == forged.data
        assert store.alerts() == []


def test_a_project_another_writer_claims_uncommitted_is_a_mismatch_once_it_commits(
    store: HubStore, postgres_url: str
) -> None:
    outcome = ingested_after(
        store,
        postgres_url,
        event_entry(sync_event(1)),
        "INSERT INTO sync_projects VALUES ('proj-1', 'other', now(), 'rt-1')",
        what="ingest waiting on the project",
    )
    assert outcome.outcome is Outcome.CONFLICT
    assert outcome.reason == ConflictReason.PROJECT_MISMATCH
    assert store.count_events() == 0
    assert store.alerts()[0].reason is ConflictReason.PROJECT_MISMATCH


def test_a_run_another_writer_homes_uncommitted_is_a_home_mismatch_once_it_commits(
    store: HubStore, postgres_url: str
) -> None:
    store.ingest([event_entry(sync_event(1, run_id="run-0"))])  # the project is acme's already
    outcome = ingested_after(
        store,
        postgres_url,
        event_entry(sync_event(1)),
        "INSERT INTO sync_runs VALUES ('proj-1', 'run-1', 'rt-9', now())",
        what="ingest waiting on the run",
    )
    assert outcome.reason == ConflictReason.HOME_RUNTIME_MISMATCH
    assert store.count_events(run_id="run-1") == 0


def test_a_deadlock_with_another_writer_is_retried_and_the_batch_judged_right(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    first, second, third = (event_entry(sync_event(s)) for s in (1, 2, 3))
    # The store's sessions look for a deadlock 50 ms after they start waiting, the other
    # writer's after a minute, and the store is the last to wait (it closes the cycle):
    # PostgreSQL aborts the store's transaction, whatever the timing.
    url = postgres_url + "?options=-c%20deadlock_timeout%3D50ms"
    caplog.set_level(logging.DEBUG, logger="hubstore.postgres.connection")
    with (
        open_store(url, create_schema=True) as store,
        psycopg.connect(postgres_url) as other,
        psycopg.connect(postgres_url) as gate,
    ):
        other.execute("SET deadlock_timeout = '60s'")
        insert_uncommitted(gate, second)  # holds the store up at sequence 2
        insert_uncommitted(other, third)
        ingesting = Ingesting(store, [first, second, third])  # takes run-1, waits at seq 2
        wait_until(lambda: blocked_sessions(postgres_url) == 1, what="ingest waiting at seq 2")
        waiting = threading.Thread(  # the other writer waits for the store's run-1 ...
            target=lambda: other.execute(
                "INSERT INTO sync_runs VALUES ('proj-1', 'run-1', 'rt-1', now())"
            )
        )
        waiting.start()
        wait_until(lambda: blocked_sessions(postgres_url) == 2, what="the other writer waiting")
        gate.rollback()  # ... and the store goes on to sequence 3, the other's: a cycle
        waiting.join(timeout=60)
        assert not waiting.is_alive()
        other.commit()
        outcomes = ingesting.result()
        assert [o.outcome for o in outcomes] == [  # type: ignore[attr-defined]
            Outcome.ACCEPTED,
            Outcome.ACCEPTED,
            Outcome.DUPLICATE,
        ]
        assert store.count_events() == 3
    assert "40P01" in caplog.text


def test_connections_the_server_dropped_are_replaced(
    store: HubStore, postgres_server: PostgresCluster, postgres_url: str
) -> None:
    store.ingest([event_entry(sync_event(1))])
    with postgres_server.admin(database_of(postgres_url)) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    assert store.ingest([event_entry(sync_event(2))])[0].outcome is Outcome.ACCEPTED
    assert store.count_events() == 2


def test_a_batch_is_looked_up_by_primary_key_probes_however_big_the_table(
    store: HubStore, postgres_url: str
) -> None:
    # The plan of the statement the store runs, on a table the planner knows is big.
    for start in range(0, 20_000, 1000):
        store.ingest(
            [event_entry(sync_event(s, run_id=f"run-{n}")) for n in range(start, start + 1000, 10)
             for s in range(1, 11)]
        )  # fmt: skip
    batch = [event_entry(sync_event(s, run_id=f"run-{n}")) for n in range(500) for s in (1, 2)]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("ANALYZE")
        rows = conn.execute("EXPLAIN " + sql.KNOWN, lookup_arguments(batch)).fetchall()
    plan = "\n".join(str(row[0]) for row in rows)
    assert "Index Scan using sync_events_pkey on sync_events" in plan, plan
    assert "Index Scan using sync_runs_pkey on sync_runs" in plan, plan
    assert "Seq Scan on sync_events" not in plan, plan


# ----- the commands on a PostgreSQL hub -----


def test_hubsync_consume_stores_a_streams_events_in_postgresql_and_the_readers_list_them(
    capsys: pytest.CaptureFixture[str],
    redis_client: redis.Redis,
    redis_url: str,
    postgres_url: str,
) -> None:
    with open_store(postgres_url, create_schema=True) as store:
        enroll(store, "rt-1", ["acme"])  # the relay player signs as this runtime
    for s in range(1, 21):
        send(redis_client, sync_event(s))
    send(redis_client, sync_event(3, data={"step_id": "evil"}))
    # the password travels in the environment, as HUBSYNC_HUB_URL, never on a command line
    env = {"HUBSYNC_HUB_URL": postgres_url, "HUBSYNC_REDIS_URL": redis_url}
    result = run_hubsync(["consume", "--name", "hub-pg", "--once", "--json"], env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["accepted"] == 20
    assert password_of(postgres_url) not in result.stdout + result.stderr
    with open_store(postgres_url, create_schema=False) as store:
        assert store.count_events() == 20
        assert store.sync_cursor("proj-1", "run-1") == 20
        [alert] = store.alerts()
        assert alert.reason is ConflictReason.SEQUENCE_REUSED
    listed = run_cli(
        capsys, "events", "--hub-project", "acme", env={"HUBSYNC_HUB_URL": postgres_url}
    )
    assert listed.code == 0, listed.err
    assert [json.loads(line)["sequence"] for line in listed.out.splitlines()] == list(range(1, 21))
    runs = run_cli(capsys, "runs", "--hub-project", "acme", env={"HUBSYNC_HUB_URL": postgres_url})
    assert runs.code == 0, runs.err
    [run] = [json.loads(line) for line in runs.out.splitlines()]
    assert (run["events"], run["sync_cursor"]) == (20, 20)


WITHOUT_PSYCOPG = (
    "import sys; sys.modules['psycopg'] = sys.modules['psycopg_pool'] = None; "
    "from hubsync.cli.main import main; main()"
)
"""``hubsync`` in a child where psycopg cannot be imported, as without the postgres extra
(a None in sys.modules makes ``import psycopg`` raise ModuleNotFoundError, as a missing
package does)."""


@pytest.mark.parametrize(
    "argv",
    [
        ["hub", "migrate"],
        ["hub", "init"],
        ["enroll", "rt-1", "--hub-project", "shop"],
        ["events", "--hub-project", "shop"],
        ["runs", "--hub-project", "shop"],
        ["consume", "--once"],
        ["status"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_a_postgresql_url_without_the_driver_says_which_extra_to_install(
    tmp_path: Path, redis_url: str, argv: list[str]
) -> None:
    url = "postgresql://hub:s3cret-pg@127.0.0.1:1/hub"
    result = subprocess.run(
        [sys.executable, "-P", "-c", WITHOUT_PSYCOPG, *argv],
        capture_output=True,
        text=True,
        env=child_environment({"HUBSYNC_HUB_URL": url, "HUBSYNC_REDIS_URL": redis_url}),
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr == (
        "error: hub URL postgresql://hub:***@127.0.0.1:1/hub: the PostgreSQL driver (psycopg) "
        "is not installed; install it with: pip install 'hubsync[postgres]'\n"
    )
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_doctor_without_the_driver_fails_the_hub_store_line_with_the_extra_to_install(
    tmp_path: Path, redis_url: str
) -> None:
    result = subprocess.run(
        [sys.executable, "-P", "-c", WITHOUT_PSYCOPG, "doctor"],
        capture_output=True,
        text=True,
        env=child_environment(
            {"HUBSYNC_HUB_URL": "postgresql://hub@127.0.0.1:1/hub", "HUBSYNC_REDIS_URL": redis_url}
        ),
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert (
        "FAIL hub-store: hub URL postgresql://hub@127.0.0.1:1/hub: the PostgreSQL driver "
        "(psycopg) is not installed; install it with: pip install 'hubsync[postgres]'"
        in result.stdout
    )
    assert "Traceback" not in result.stderr
