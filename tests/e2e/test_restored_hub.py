"""A hub store that went back in time, with ``hubsync`` as real processes: a store restored
from a backup, or a second copy of the hub's store, is refused (and doctor FAILs it) until an
operator accepts it; a running consumer whose store falls behind the namespace stops; a
runtime revoked after the backup stays revoked in the restored store."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import redis

from consumers.stream.hub_binding import namespace_mark
from hubstore import open_store
from hubstore.resyncs import ResyncGroup, groups
from hubstore.sqlite.store import SqliteHubStore
from hubstore.store import HubStore, RuntimeState
from hubsync.core import keys
from hubsync.processes import PipelineProcesses, run_hubsync
from producers.registry import RuntimeRegistry
from producers.store.event_store import RunEventStore
from tests.helpers.consumer_support import (
    consume_once,
    count_rows,
    enroll_on,
    hub_id_of,
    run_consume,
)
from tests.helpers.postgres_server import dump_database, restore_database
from tests.helpers.relay_player import HUB_PROJECT, RUNTIME, send, sync_event
from tests.helpers.relay_support import make_runtime
from tests.helpers.support import wait_until


def commits_of(hub_db: Path) -> int:
    """The commit counter of the hub store at ``hub_db``."""
    with SqliteHubStore(hub_db) as store:
        return store.commit_counter()


def back_up(hub_db: Path, backup: Path) -> None:
    """``hubsync hub backup`` of ``hub_db`` to ``backup``."""
    made = run_hubsync(["hub", "backup", "--hub-db", str(hub_db), "--to", str(backup)])
    assert made.returncode == 0, made.stderr


def one_event_backed_up(
    redis_client: redis.Redis, redis_url: str, hub_db: Path, backup: Path
) -> None:
    """A hub at ``hub_db`` that stored one event, backed up to ``backup``."""
    enroll_on(hub_db)
    send(redis_client, sync_event(1))
    consume_once(redis_url, hub_db)
    back_up(hub_db, backup)


def restore(backup: Path, hub_db: Path) -> None:
    """Put ``backup`` in place of ``hub_db``, as an operator restoring a file does."""
    for companion in (hub_db.with_name(hub_db.name + s) for s in ("-wal", "-shm")):
        companion.unlink(missing_ok=True)
    shutil.copyfile(backup, hub_db)


def test_a_hub_restored_from_a_backup_is_refused_until_the_operator_accepts_it(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    hub_db, backup = tmp_path / "hub.db", tmp_path / "nightly.db"
    enroll_on(hub_db)
    for s in range(1, 6):
        send(redis_client, sync_event(s))
    assert consume_once(redis_url, hub_db)["accepted"] == 5
    back_up(hub_db, backup)
    for s in range(6, 11):
        send(redis_client, sync_event(s))
    assert consume_once(redis_url, hub_db)["accepted"] == 5
    hub_id = hub_id_of(hub_db)
    # a batch is one commit; how many batches a read makes is the read budget's business
    before, mark = commits_of(backup), namespace_mark(redis_client, hub_id)
    assert mark == commits_of(hub_db) > before > 0

    restore(backup, hub_db)
    refused = run_consume(redis_url, hub_db, "--once", "--json")
    assert refused.returncode == 2, refused.stderr
    [line] = refused.stderr.strip().splitlines()
    assert "older than this Redis namespace" in line and "--accept-restore" in line
    assert refused.stdout == "" and count_rows(hub_db) == 5
    doctor = run_hubsync(["doctor", "--redis-url", redis_url, "--hub-db", str(hub_db)])
    assert doctor.returncode == 1 and "FAIL hub-mark: " in doctor.stdout, doctor.stdout

    send(redis_client, sync_event(11))
    accepted = run_consume(redis_url, hub_db, "--once", "--json", "--accept-restore")
    assert accepted.returncode == 0, accepted.stderr
    assert json.loads(accepted.stdout)["accepted"] == 1
    assert f"lowered from {mark} to {before} commits" in accepted.stderr
    assert namespace_mark(redis_client, hub_id) == commits_of(hub_db) == before + 1  # one batch
    assert count_rows(hub_db) == 6  # 6 to 10 were acked before the restore: not in it


def test_of_two_copies_of_one_hub_the_one_behind_is_refused(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    first, copy = tmp_path / "hub.db", tmp_path / "copy.db"
    one_event_backed_up(redis_client, redis_url, first, copy)
    assert hub_id_of(copy) == hub_id_of(first)

    send(redis_client, sync_event(2))
    assert consume_once(redis_url, copy)["accepted"] == 1  # the copy moves on first
    send(redis_client, sync_event(3))
    refused = run_consume(redis_url, first, "--once")
    assert refused.returncode == 2 and "older than this Redis namespace" in refused.stderr
    assert count_rows(first) == 1 and redis_client.xlen(keys.events_stream("acme", RUNTIME)) >= 1


def test_a_running_consumer_stops_once_its_store_falls_behind_the_namespace(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    hub_db = tmp_path / "hub.db"
    enroll_on(hub_db)
    hub_id = hub_id_of(hub_db)
    with PipelineProcesses(redis_url, tmp_path / "logs") as pipeline:
        worker = pipeline.consumer("w1", hub_db, "--block-ms", "100")
        send(redis_client, sync_event(1))
        wait_until(lambda: count_rows(hub_db) == 1, timeout=30, what="the event stored")
        wait_until(
            lambda: namespace_mark(redis_client, hub_id) == 1, timeout=10, what="the mark raised"
        )
        redis_client.zadd(keys.HUB_MARK, {hub_id: 5})  # a copy of this store got further
        assert worker.wait(timeout=20) == 2
        assert "older than this Redis namespace" in worker.log_text()


def test_a_runtime_revoked_after_the_backup_stays_revoked_once_it_is_restored(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    hub_db, backup = tmp_path / "hub.db", tmp_path / "nightly.db"
    one_event_backed_up(redis_client, redis_url, hub_db, backup)
    with SqliteHubStore(hub_db) as store:
        store.revoke(RUNTIME)  # its key leaked: revoked on the hub
    consume_once(redis_url, hub_db)  # a worker's maintenance publishes the revocation
    assert redis_client.hlen(keys.REVOCATIONS) == 1

    restore(backup, hub_db)  # the runtime is enrolled, its key valid, in the restored store
    send(redis_client, sync_event(2))  # signed with the revoked key
    counts = consume_once(redis_url, hub_db, "--accept-restore")
    assert counts["accepted"] == 0 and counts["dead"] == 1
    [(_, letter)] = redis_client.xrange(keys.dead_stream("acme"))
    assert letter[b"reason"] == b"unauthenticated" and b"revoked" in letter[b"detail"]
    assert count_rows(hub_db) == 1


# ----- hub restore: the runtimes make the restored hub whole again -----


class Hub(NamedTuple):
    """A hub store as the acceptance test drives it: the options naming it, how to open it,
    and how an operator backs it up and puts the backup back."""

    args: tuple[str, ...]
    open: Callable[[], HubStore]
    back_up: Callable[[], None]
    put_back: Callable[[], None]


class Runtime(NamedTuple):
    """A runtime of the acceptance test: its state dir, registry, one project's store, and
    the options its relay runs with."""

    state_dir: Path
    registry: RuntimeRegistry
    store: RunEventStore
    relay_options: tuple[str, ...]

    @property
    def runtime_id(self) -> str:
        return self.registry.runtime_id


def a_runtime(tmp_path: Path, name: str, hub: Hub, *relay_options: str) -> Runtime:
    """A runtime enrolled on ``hub`` for hub project ``acme``, with one project."""
    state_dir = tmp_path / name / "state"
    with hub.open() as store:
        registry, (project,) = make_runtime(state_dir, [HUB_PROJECT], store)
    return Runtime(state_dir, registry, project, relay_options)


def append(runtime: Runtime, first: int, count: int) -> None:
    """``count`` events over two runs of ``runtime``'s project."""
    for n in range(first, first + count):
        runtime.store.append_event(f"run-{n % 2}", "step.completed", {"step": f"s{n}", "ok": True})


def relay_once(runtime: Runtime, redis_url: str) -> None:
    """``hubsync relay --once`` of ``runtime`` as a real process."""
    argv = ["relay", "--once", "--state-dir", str(runtime.state_dir), "--redis-url", redis_url]
    done = run_hubsync([*argv, *runtime.relay_options])
    assert done.returncode == 0, done.stderr


def consume(hub: Hub, redis_url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """``hubsync consume --once --json`` on ``hub`` as a real process."""
    return run_hubsync(["consume", *hub.args, "--redis-url", redis_url, "--once", "--json", *extra])


def sync(runtimes: list[Runtime], redis_url: str, hub: Hub) -> None:
    """Every relay sends, one consumer pass stores, every relay applies the acks."""
    for runtime in runtimes:
        relay_once(runtime, redis_url)
    stored = consume(hub, redis_url)
    assert stored.returncode == 0, stored.stderr
    for runtime in runtimes:
        relay_once(runtime, redis_url)


def local_events(runtime: Runtime) -> dict[tuple[str, int], bytes]:
    """Every event of the runtime's project, as its own derivation makes its bytes."""
    store = runtime.store
    return {
        (e.run_id, e.sequence): store._deriver.rederive(
            e.run_id, e.sequence, e.event_type, e.occurred_at, e.payload
        )[0]
        for run_id in store.run_ids()
        for e in store.events(run_id)
    }


def hub_events(hub: Hub, project_id: str) -> dict[tuple[str, int], bytes]:
    """Every event the hub stored of ``project_id``, its bytes as stored."""
    with hub.open() as store:
        stored = store.events(HUB_PROJECT, project_id=project_id, limit=10_000)
    return {(e.run_id, e.sequence): e.record for e in stored}


def restore_scenario(hub: Hub, redis_url: str, tmp_path: Path) -> None:
    """Back up, sync more (one runtime pruning its acked rows at once), revoke a runtime, put
    the backup back: the consumer refuses it; after hub restore and the relays, the hub holds
    every event of the runtimes once, byte for byte, and the revoked runtime stays refused."""
    kept = a_runtime(tmp_path, "kept", hub)
    pruned = a_runtime(tmp_path, "pruned", hub, "--outbox-retention", "0")
    leaked = a_runtime(tmp_path, "leaked", hub)
    runtimes = [kept, pruned, leaked]
    for runtime in runtimes:
        append(runtime, 0, 4)
    sync(runtimes, redis_url, hub)
    hub.back_up()
    with hub.open() as store:
        backed_up = store.commit_counter()

    for runtime in runtimes:
        append(runtime, 4, 6)  # acked after the backup: the restored hub lacks them
    sync(runtimes, redis_url, hub)
    with hub.open() as store:
        assert store.count_events() == 30
    assert pruned.store.outbox_counts()["total"] == 0  # acked, then pruned at once
    assert kept.store.outbox_counts()["acked"] == 10
    revoked = run_hubsync(["enroll", "--revoke", leaked.runtime_id, *hub.args])
    assert revoked.returncode == 0, revoked.stderr
    consume(hub, redis_url)  # a worker's maintenance publishes the revocation

    hub.put_back()
    refused = consume(hub, redis_url)
    assert refused.returncode == 2 and "hubsync hub restore" in refused.stderr, refused.stderr

    restored = run_hubsync(["hub", "restore", *hub.args, "--redis-url", redis_url, "--json"])
    assert restored.returncode == 0, restored.stderr
    document = json.loads(restored.stdout)
    assert [r["runtime_id"] for r in document["revocations"] if r["revoked"]] == [leaked.runtime_id]
    assert document["mark"]["after"] == backed_up < document["mark"]["before"]
    assert sorted(a["runtime_id"] for a in document["asked"]) == sorted(
        [kept.runtime_id, pruned.runtime_id]
    )

    def finished() -> list[ResyncGroup]:
        with hub.open() as store:
            return groups(store.resyncs())

    def whole() -> bool:
        sync([kept, pruned], redis_url, hub)
        return all(g.finished for g in finished())

    wait_until(whole, timeout=120, interval=0.1, what="every runtime asked done")
    for runtime in (kept, pruned):
        project_id = runtime.store.project_id
        assert hub_events(hub, project_id) == local_events(runtime)  # once, byte for byte
    [group] = finished()
    assert (group.runtimes, group.done, group.accepted) == (2, 2, 12)
    assert group.duplicate == 0  # the cursors are exact: nothing the backup held came again
    with hub.open() as store:
        record = store.enrolled_runtime(leaked.runtime_id)
    assert record is not None and record.state is RuntimeState.REVOKED

    append(leaked, 10, 1)  # the revoked runtime is still refused: its stream is not read
    sync([leaked], redis_url, hub)
    assert len(hub_events(hub, leaked.store.project_id)) == 4
    assert leaked.store.outbox_counts()["pending"] == 1
    status = run_hubsync(["status", *hub.args, "--redis-url", redis_url, "--json"])
    assert status.returncode == 0, status.stderr
    [shown] = json.loads(status.stdout)["resyncs"]
    assert (shown["runtimes_asked"], shown["runtimes_done"]) == (2, 2)


def test_hub_restore_makes_a_restored_hub_whole_again_from_the_runtimes(
    redis_url: str, tmp_path: Path
) -> None:
    hub_db, backup = tmp_path / "hub.db", tmp_path / "nightly.db"
    hub = Hub(
        ("--hub-db", str(hub_db)),
        lambda: SqliteHubStore(hub_db),
        lambda: back_up(hub_db, backup),
        lambda: restore(backup, hub_db),
    )
    restore_scenario(hub, redis_url, tmp_path)


def test_hub_restore_makes_a_postgresql_hub_restored_from_a_dump_whole_again(
    redis_url: str, postgres_url: str, tmp_path: Path
) -> None:
    dump = tmp_path / "hub.dump"

    def pg_dump() -> None:  # taken mid-run: the runtimes go on syncing after it
        dump_database(postgres_url, dump)

    def pg_restore() -> None:
        restore_database(postgres_url, dump)

    with open_store(postgres_url, create_schema=True) as store:
        store.init_hub()
    hub = Hub(
        ("--hub-url", postgres_url),
        lambda: open_store(postgres_url, create_schema=False),
        pg_dump,
        pg_restore,
    )
    restore_scenario(hub, redis_url, tmp_path)
