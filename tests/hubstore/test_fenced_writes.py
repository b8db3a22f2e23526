"""Storage-side fencing: the fenced write function on real Redis, and the SQLite fence table."""

from __future__ import annotations

import dataclasses
import hashlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hubstore.errors import FencedWriteRefusedError, InvalidLeaseArgumentError
from hubstore.leases import Lease, LeaseClient
from hubstore.leases.fence import advance_fence, ensure_fence_table, fenced_write, highest_token
from hubsync.core import keys
from hubsync.core.sqlite import Database
from tests.helpers.lease_support import expire_lease

TTL = 30_000


@pytest.fixture
def leases(redis_client: redis.Redis) -> LeaseClient:
    return LeaseClient(redis_client)


def test_a_stale_holder_cannot_write_after_a_takeover_even_before_the_new_holder_writes(
    leases: LeaseClient, redis_client: redis.Redis
) -> None:
    old = leases.acquire_or_raise("r", "box-a", TTL).lease
    assert leases.fenced_write(old, "config", b"from-a").ok
    expire_lease(redis_client, "r")
    new = leases.acquire_or_raise("r", "box-b", TTL).lease
    late = leases.fenced_write(old, "config", b"late-a")
    assert (late.status, late.highest) == ("superseded", new.token)
    assert leases.read_fenced("r", "config") == (b"from-a", old.token)
    assert leases.fenced_write(new, "config", b"from-b").ok
    assert leases.read_fenced("r", "config") == (b"from-b", new.token)


def test_the_current_token_may_write_many_times(leases: LeaseClient) -> None:
    lease = leases.acquire_or_raise("r", "box-a", TTL).lease
    for value in [b"1", b"2", b"3"]:
        assert leases.fenced_write(lease, "v", value).ok
    assert leases.read_fenced("r", "v") == (b"3", lease.token)


def test_a_token_never_issued_is_refused(leases: LeaseClient) -> None:
    never = Lease("r", "box-a", 1, "no-proof-was-ever-issued")
    assert leases.fenced_write(never, "v", b"x").status == "unknown_token"
    lease = leases.acquire_or_raise("r", "box-a", TTL).lease
    ahead = dataclasses.replace(lease, token=lease.token + 5)
    assert leases.fenced_write(ahead, "v", b"x").status == "unknown_token"
    assert leases.read_fenced("r", "v") is None


def test_a_value_written_under_a_larger_token_refuses_smaller_ones_as_stale(
    leases: LeaseClient, redis_client: redis.Redis
) -> None:
    # The lease hash is lost (an operator deleted it): the resource's own highest
    # token still refuses the stale writer.
    first = leases.acquire_or_raise("r", "box-a", TTL).lease
    leases.release_or_raise(first)
    second = leases.acquire_or_raise("r", "box-b", TTL).lease
    assert leases.fenced_write(second, "v", b"b").ok
    redis_client.hset("hubsync:lease:{r}", "fence", first.token)
    redis_client.hset("hubsync:lease:{r}", "token", first.token)
    assert leases.fenced_write(first, "v", b"a").status == "stale"


def test_fenced_writes_survive_script_flush(leases: LeaseClient, redis_client: redis.Redis) -> None:
    lease = leases.acquire_or_raise("r", "box-a", TTL).lease
    redis_client.script_flush()
    assert leases.fenced_write(lease, "v", b"x").ok


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "hub.db")

    def create(connection: sqlite3.Connection) -> None:
        ensure_fence_table(connection)
        connection.execute("CREATE TABLE effects_seen (resource TEXT, token INTEGER, value TEXT)")

    database.write(create)
    yield database
    database.close()


@pytest.fixture
def conn(db: Database) -> sqlite3.Connection:
    return db.connection


def _guarded_insert(db: Database, token: int, value: str, holder: str = "box-a") -> None:
    fenced_write(
        db,
        "repo/main",
        token,
        holder,
        lambda c: c.execute("INSERT INTO effects_seen VALUES ('repo/main', ?, ?)", (token, value)),
    )


def test_sqlite_fence_lets_equal_and_larger_tokens_write(
    db: Database, conn: sqlite3.Connection
) -> None:
    _guarded_insert(db, 3, "a")
    _guarded_insert(db, 3, "b")
    _guarded_insert(db, 7, "c", holder="box-b")
    assert highest_token(conn, "repo/main") == 7
    assert conn.execute("SELECT count(*) FROM effects_seen").fetchone()[0] == 3


def test_sqlite_fence_refuses_a_stale_token_and_rolls_the_write_back(
    db: Database, conn: sqlite3.Connection
) -> None:
    _guarded_insert(db, 5, "new holder", holder="box-b")
    with pytest.raises(FencedWriteRefusedError) as info:
        _guarded_insert(db, 4, "stale holder")
    assert (info.value.highest, info.value.reason) == (5, "stale")
    rows = conn.execute("SELECT value FROM effects_seen").fetchall()
    assert rows == [("new holder",)]
    assert highest_token(conn, "repo/main") == 5


def test_sqlite_fence_refuses_the_same_token_from_another_holder(
    db: Database, conn: sqlite3.Connection
) -> None:
    # Two holders can only share a token if someone rewrote the lease: the first one stays.
    _guarded_insert(db, 5, "first", holder="box-a")
    with pytest.raises(FencedWriteRefusedError) as info:
        _guarded_insert(db, 5, "second", holder="box-b")
    assert (info.value.highest, info.value.reason) == (5, "not_holder")
    _guarded_insert(db, 5, "again", holder="box-a")
    rows = conn.execute("SELECT value FROM effects_seen").fetchall()
    assert rows == [("first",), ("again",)]


def test_a_fence_table_made_before_the_holder_gets_its_column(tmp_path: Path) -> None:
    database = Database(tmp_path / "old.db")
    try:
        database.write(
            lambda c: c.execute(
                "CREATE TABLE resource_fences (resource TEXT PRIMARY KEY, "
                "highest_token INTEGER NOT NULL, updated_at TEXT NOT NULL) STRICT"
            )
        )
        database.write(lambda c: c.execute("INSERT INTO resource_fences VALUES ('r', 3, 'x')"))
        database.write(ensure_fence_table)
        database.write(lambda c: advance_fence(c, "r", 3, "box-a"))  # an unknown holder: taken
        with pytest.raises(FencedWriteRefusedError):
            database.write(lambda c: advance_fence(c, "r", 3, "box-b"))
    finally:
        database.close()


def test_sqlite_fence_rolls_back_when_the_guarded_write_fails(
    db: Database, conn: sqlite3.Connection
) -> None:
    def failing(c: sqlite3.Connection) -> None:
        c.execute("INSERT INTO effects_seen VALUES ('repo/main', 9, 'half')")
        raise RuntimeError("write failed")

    with pytest.raises(RuntimeError):
        fenced_write(db, "repo/main", 9, "box-a", failing)
    assert highest_token(conn, "repo/main") == 0
    assert conn.execute("SELECT count(*) FROM effects_seen").fetchone()[0] == 0


def test_sqlite_fence_is_per_resource(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN")
    advance_fence(conn, "a", 10, "box-a")
    advance_fence(conn, "b", 1, "box-a")
    conn.execute("COMMIT")
    assert (highest_token(conn, "a"), highest_token(conn, "b")) == (10, 1)


def test_sqlite_fence_validates_its_arguments(conn: sqlite3.Connection) -> None:
    with pytest.raises(InvalidLeaseArgumentError):
        advance_fence(conn, "bad{name}", 1, "box-a")
    with pytest.raises(InvalidLeaseArgumentError):
        advance_fence(conn, "a", 0, "box-a")
    with pytest.raises(InvalidLeaseArgumentError):
        advance_fence(conn, "a", 1, "")


def test_the_current_token_without_its_holders_proof_is_refused(
    leases: LeaseClient, redis_client: redis.Redis
) -> None:
    # The token is public (`hubsync lease show` prints it): it alone must not write.
    lease = leases.acquire_or_raise("r", "box-a", TTL).lease
    shown = leases.show("r").token
    forged = [
        Lease("r", "box-a", shown, "a-guessed-proof"),
        Lease("r", "box-b", shown, lease.proof),
    ]
    assert [leases.fenced_write(f, "v", b"forged").status for f in forged] == ["not_holder"] * 2
    assert leases.read_fenced("r", "v") is None
    assert leases.fenced_write(lease, "v", b"genuine").ok
    leases.release_or_raise(lease)
    assert leases.fenced_write(lease, "v", b"after release").status == "not_holder"
    assert leases.read_fenced("r", "v") == (b"genuine", lease.token)


def test_a_fenced_value_refuses_its_token_from_another_holder_even_after_the_hash_is_rewritten(
    leases: LeaseClient, redis_client: redis.Redis
) -> None:
    lease = leases.acquire_or_raise("r", "box-a", TTL).lease
    assert leases.fenced_write(lease, "v", b"genuine").ok
    # someone who may write the lease hash makes it name another holder under the same token
    thief = Lease("r", "box-b", lease.token, "thiefs-own-secret")
    redis_client.hset(
        keys.lease("r"),
        mapping={"holder": thief.holder, "proof": hashlib.sha1(thief.proof.encode()).hexdigest()},
    )
    assert leases.fenced_write(thief, "v", b"stolen").status == "not_holder"
    assert leases.read_fenced("r", "v") == (b"genuine", lease.token)
