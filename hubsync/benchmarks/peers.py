"""Peers: the designs hubsync is measured against, moving the same entries into the same table.

Each peer runs a producer process and a consumer process at once (spawned,
so they share no interpreter), fed the same ~540-byte events the pipeline
moves, into a ``sync_events`` table like the hub's. The rate is events over
the time from the producer's first send to the consumer's last commit. Peers
are given every benefit: their producers read events from memory (no outbox)
and their consumers do not validate or hash anything.

* ``naive``: one XADD per event; one XREADGROUP, one SQLite transaction and
  one XACK per event;
* ``rq``: one RQ job per event (enqueued with ``enqueue_many`` in pipelines of
  500); a non-forking ``SimpleWorker`` runs each job: one SQLite transaction;
* ``jetstream``: NATS JetStream with ``Nats-Msg-Id`` dedupe (nats-py):
  asynchronous publishes 500 in flight; a pull consumer fetching 500, one
  SQLite transaction per fetch, then each message acked. Needs a
  ``nats-server`` binary (a private one is started on a free port).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any

from hubsync.benchmarks.procs import BenchError, NatsServer
from hubsync.benchmarks.workload import INSERT_ROW, entries, iter_rows, raw_hub_table
from hubsync.core.connections import RedisTarget, connect
from hubsync.core.redis_values import as_text

STREAM = "bench:peer:events"
GROUP = "peer"
RQ_QUEUE = "bench-peer"
NATS_STREAM = "BENCH"
NATS_SUBJECT = "bench.events"
BATCH = 500

_rq_db: sqlite3.Connection | None = None
_rq_done = 0


# ----- naive -----


def _naive_producer(url: str, events: int) -> float:
    client = connect(RedisTarget(url))
    batch = entries(events)
    started = time.time()
    for fields in batch:
        client.xadd(STREAM, fields)  # type: ignore[arg-type]
    client.close()
    return started


def _naive_consumer(url: str, events: int, db_path: str, ready: EventType) -> float:
    client = connect(RedisTarget(url))
    db = raw_hub_table(Path(db_path))
    ready.set()
    done = 0
    while done < events:
        reply: Any = client.xreadgroup(GROUP, "naive", {STREAM: ">"}, count=1, block=1000)
        if not reply:
            continue
        entry_id, raw = reply[0][1][0]
        fields = {k.decode(): v for k, v in raw.items()}
        db.execute("BEGIN IMMEDIATE")
        db.executemany(INSERT_ROW, iter_rows([fields]))
        db.execute("COMMIT")
        client.xack(STREAM, GROUP, entry_id)
        done += 1
    finished = time.time()
    db.close()
    client.close()
    return finished


# ----- one RQ job per event -----


def rq_ingest_one(row: tuple[Any, ...]) -> None:
    """The RQ job of the ``rq`` peer: store one event in its own SQLite transaction."""
    global _rq_done
    assert _rq_db is not None, "the rq peer's worker opens the table before working"
    _rq_db.execute("BEGIN IMMEDIATE")
    _rq_db.execute(INSERT_ROW, row)
    _rq_db.execute("COMMIT")
    _rq_done += 1


def _rq_producer(url: str, events: int) -> float:
    from rq import Queue

    client = connect(RedisTarget(url), cluster=False)  # RQ needs one Redis server
    queue = Queue(RQ_QUEUE, connection=client)
    rows = list(iter_rows(entries(events)))
    started = time.time()
    for start in range(0, len(rows), BATCH):
        queue.enqueue_many(
            [Queue.prepare_data(rq_ingest_one, args=(row,)) for row in rows[start : start + BATCH]]
        )
    client.close()
    return started


def _rq_consumer(url: str, events: int, db_path: str, ready: EventType) -> float:
    from rq import Queue, SimpleWorker

    global _rq_db
    _rq_db = raw_hub_table(Path(db_path))
    client = connect(RedisTarget(url), cluster=False)  # RQ needs one Redis server
    worker = SimpleWorker([Queue(RQ_QUEUE, connection=client)], connection=client)
    ready.set()
    while _rq_done < events:
        if not worker.work(burst=True, logging_level="WARNING"):
            time.sleep(0.01)  # the producer has not enqueued anything yet
    finished = time.time()
    _rq_db.close()
    client.close()
    return finished


# ----- NATS JetStream -----


async def _jetstream_publish(url: str, events: int) -> float:
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream()
    batch = entries(events)
    started = time.time()
    for start in range(0, len(batch), BATCH):
        for fields in batch[start : start + BATCH]:
            key = f"{as_text(fields['project_id'])}:{as_text(fields['run_id'])}:{as_text(fields['sequence'])}"
            await js.publish_async(
                NATS_SUBJECT, _bytes(fields["event"]), headers={"Nats-Msg-Id": key}
            )
        await js.publish_async_completed()
    await nc.close()
    return started


async def _jetstream_consume(url: str, events: int, db_path: str, ready: EventType) -> float:
    import nats

    template = entries(1)[0]
    nc = await nats.connect(url)
    js = nc.jetstream()
    sub = await js.pull_subscribe(NATS_SUBJECT, durable="hub", stream=NATS_STREAM)
    db = raw_hub_table(Path(db_path))
    ready.set()
    done = 0
    while done < events:
        try:
            msgs = await sub.fetch(BATCH, timeout=1)
        except TimeoutError:
            # nats-py raises its own TimeoutError (a subclass) when nothing came, and a
            # plain one when the deadline ran out between its two requests (a busy machine).
            continue
        rows = []
        for msg in msgs:
            project_id, run_id, sequence = (msg.headers or {})["Nats-Msg-Id"].split(":")
            fields = dict(template) | {
                "project_id": project_id,
                "run_id": run_id,
                "sequence": sequence,
                "event": msg.data,
            }
            rows.append(fields)
        db.execute("BEGIN IMMEDIATE")
        db.executemany(INSERT_ROW, iter_rows(rows))
        db.execute("COMMIT")
        for msg in msgs:
            await msg.ack()
        done += len(msgs)
    finished = time.time()
    db.close()
    await nc.close()
    return finished


def _jetstream_producer(url: str, events: int) -> float:
    return asyncio.run(_jetstream_publish(url, events))


def _jetstream_consumer(url: str, events: int, db_path: str, ready: EventType) -> float:
    return asyncio.run(_jetstream_consume(url, events, db_path, ready))


async def _jetstream_stream(url: str) -> None:
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name=NATS_STREAM, subjects=[NATS_SUBJECT], duplicate_window=120.0)
    await nc.close()


# ----- the harness -----


def _bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def _call(target: Callable[..., float], args: tuple[Any, ...], out: Any, name: str) -> None:
    try:
        out.put((name, target(*args)))
    except BaseException as exc:  # reported to the parent, which raises
        out.put((name, f"{type(exc).__name__}: {exc}"))


def _race(
    producer: Callable[..., float],
    consumer: Callable[..., float],
    url: str,
    events: int,
    db_path: Path,
    timeout: float,
) -> dict[str, Any]:
    """Run a peer's producer and consumer processes at once; events/s from first send to last commit."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    ready = ctx.Event()
    consume = ctx.Process(
        target=_call, args=(consumer, (url, events, str(db_path), ready), out, "consumer")
    )
    consume.start()
    if not ready.wait(60):
        consume.kill()
        raise BenchError("a peer's consumer did not start")
    produce = ctx.Process(target=_call, args=(producer, (url, events), out, "producer"))
    produce.start()
    results: dict[str, Any] = {}
    try:
        for _ in range(2):
            name, value = out.get(timeout=timeout)
            results[name] = value
    finally:
        for proc in (produce, consume):
            proc.join(5)
            if proc.is_alive():
                proc.kill()
    bad = {k: v for k, v in results.items() if isinstance(v, str)}
    if bad:
        raise BenchError(f"peer failed: {bad}")
    db = sqlite3.connect(db_path)
    stored = db.execute("SELECT count(*) FROM sync_events").fetchone()[0]
    db.close()
    if stored != events:
        raise BenchError(f"peer stored {stored} of {events} events")
    seconds = results["consumer"] - results["producer"]
    return {"events": events, "seconds": round(seconds, 3), "events_per_s": round(events / seconds)}


def measure_naive(url: str, events: int) -> dict[str, Any]:
    """The naive design: one XADD and one hub transaction per event."""
    client = connect(RedisTarget(url))
    client.flushall()
    client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    client.close()
    with tempfile.TemporaryDirectory(prefix="hubsync-bench-naive-") as tmp:
        result = _race(_naive_producer, _naive_consumer, url, events, Path(tmp) / "hub.db", 600)
    return {"design": "one XADD + one XREADGROUP/transaction/XACK per event"} | result


def measure_rq(url: str, events: int) -> dict[str, Any]:
    """One RQ job per event, run by a SimpleWorker (no fork per job)."""
    client = connect(RedisTarget(url))
    client.flushall()
    client.close()
    with tempfile.TemporaryDirectory(prefix="hubsync-bench-rq-") as tmp:
        result = _race(_rq_producer, _rq_consumer, url, events, Path(tmp) / "hub.db", 600)
    return {"design": "one RQ job per event (enqueue_many, SimpleWorker)"} | result


def measure_jetstream(events: int) -> dict[str, Any]:
    """NATS JetStream with Nats-Msg-Id dedupe, on a private nats-server; skipped without one."""
    if shutil.which("nats-server") is None:
        return {"skipped": "nats-server is not installed"}
    try:
        import nats  # noqa: F401
    except ImportError:
        return {"skipped": "nats-py is not installed (pip install 'hubsync[bench]')"}
    with (
        tempfile.TemporaryDirectory(prefix="hubsync-bench-nats-") as tmp,
        NatsServer(Path(tmp) / "nats") as server,
    ):
        asyncio.run(_jetstream_stream(server.url))
        hub_db = Path(tmp) / "hub.db"
        result = _race(_jetstream_producer, _jetstream_consumer, server.url, events, hub_db, 600)
    return {"design": "NATS JetStream, Nats-Msg-Id dedupe, pull consumer (nats-py)"} | result
