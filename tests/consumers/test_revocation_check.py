"""Key revocations kept in Redis (``hubsync:revocations``) on a real Redis: a store restored from
before a revocation or a re-key cannot bring the key back; a revocation that does not verify
under the key it names changes nothing."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import redis

from consumers.stream.authentication import Refusal, RuntimeAuthenticator
from consumers.stream.revocation_check import RevocationCheck
from hubstore.revocations import revocation
from hubstore.sqlite.store import SqliteHubStore
from hubstore.store import DEFAULT_ROTATION_GRACE, HubStore
from hubsync.core import keys
from hubsync.core.clock import utc_now
from hubsync.core.signing import RuntimeKey
from tests.helpers.relay_player import entry_fields, sync_event
from tests.helpers.trust import remember


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[SqliteHubStore]:
    with SqliteHubStore(tmp_path / "hub.db") as store:
        store.init_hub()
        yield store


def backup_of(store: SqliteHubStore, tmp_path: Path, name: str) -> SqliteHubStore:
    """A copy of the store's file as it is now (what a nightly backup holds)."""
    copy = tmp_path / name
    store._db.read(lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
    shutil.copyfile(store.path, copy)
    return SqliteHubStore(copy, create_schema=False)


def authenticate(store: HubStore, client: redis.Redis) -> RuntimeKey | Refusal:
    """What a new worker on ``store`` makes of a signed event of rt-1."""
    raw = {
        k: v.encode() if isinstance(v, str) else v for k, v in entry_fields(sync_event(1)).items()
    }
    check = RevocationCheck(client, store)
    return RuntimeAuthenticator(store, revocations=check).event(raw, "acme")


def test_a_runtime_revoked_after_the_backup_stays_revoked_in_the_restored_store(
    hub: SqliteHubStore, redis_client: redis.Redis, tmp_path: Path
) -> None:
    remember(hub.enroll("rt-1", ["acme"]))
    with backup_of(hub, tmp_path, "nightly.db") as restored:
        hub.revoke("rt-1")
        assert isinstance(authenticate(restored, redis_client), RuntimeKey)  # Redis knows nothing
        # a worker on the live store refuses it, and publishes the store's revocations
        assert isinstance(authenticate(hub, redis_client), Refusal)
        assert redis_client.hlen(keys.REVOCATIONS) == 1
        verdict = authenticate(restored, redis_client)
    assert isinstance(verdict, Refusal) and "revoked" in verdict.detail


def test_a_key_retired_by_a_re_key_ends_with_its_grace_in_the_restored_store(
    hub: SqliteHubStore, redis_client: redis.Redis, tmp_path: Path
) -> None:
    old = remember(hub.enroll("rt-1", ["acme"]))
    with backup_of(hub, tmp_path, "nightly.db") as restored:
        hub.enroll("rt-1", ["acme"])  # a new key: the old one ends with the grace
        RevocationCheck(redis_client, hub).publish()
        record = restored.enrolled_runtime("rt-1")
        assert record is not None and record.key == old.key
        check = RevocationCheck(redis_client, restored)
        assert check.apply(record, utc_now()).key == old.key  # within the grace
        later = utc_now() + DEFAULT_ROTATION_GRACE + timedelta(minutes=1)
        assert check.apply(record, later).key is None


def test_a_revocation_that_does_not_verify_is_ignored(
    hub: SqliteHubStore, redis_client: redis.Redis
) -> None:
    key = RuntimeKey(remember(hub.enroll("rt-1", ["acme"])).key)
    record = hub.enrolled_runtime("rt-1")
    assert record is not None
    now = utc_now()
    forged = revocation("rt-1", b"\x07" * 32, now - timedelta(hours=1))  # another key's
    wrong_runtime = revocation("rt-2", key.reveal(), now - timedelta(hours=1))
    bad_sig = json.dumps(
        {"runtime_id": "rt-1", "effective_at": forged.effective_at, "sig": "0" * 64}
    )
    for value in (forged.encoded(), wrong_runtime.encoded(), bad_sig, "not json", "{}"):
        redis_client.hset(keys.REVOCATIONS, key.fingerprint, value)
        assert RevocationCheck(redis_client, hub).apply(record, now).key == record.key
    genuine = revocation("rt-1", key.reveal(), now - timedelta(seconds=1))
    redis_client.hset(keys.REVOCATIONS, key.fingerprint, genuine.encoded())
    assert RevocationCheck(redis_client, hub).apply(record, now).key is None


def test_deleting_the_redis_record_cannot_bring_back_a_key_the_store_revoked(
    hub: SqliteHubStore, redis_client: redis.Redis
) -> None:
    remember(hub.enroll("rt-1", ["acme"]))
    hub.revoke("rt-1")
    RevocationCheck(redis_client, hub).publish()
    redis_client.delete(keys.REVOCATIONS)
    assert isinstance(authenticate(hub, redis_client), Refusal)
    assert redis_client.hlen(keys.REVOCATIONS) == 1  # published again by the lookup's check
