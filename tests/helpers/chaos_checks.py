"""End checks of the chaos soak, once everything has drained.

Each check returns figures for the report and raises ``AssertionError`` with
the first offending keys (never event bytes) when an invariant does not hold:

* hub rows equal the committed local events, key by key and byte for byte,
  with zero duplicates;
* every outbox row is acked, or parked in a state an injected fault explains;
* every injected conflict raised an alert (hub table and alert stream), every
  forgery a security alert, and no genuine event ever did;
* every garbage entry was dead-lettered with its reason, every forgery as
  ``unauthenticated``, and nothing genuine was, except for over-delivery
  (``max_deliveries``);
* no relay was told anything about a forgery;
* no planted secret is in the hub store (read through ``HubStore``, and the
  files of the database: the SQLite file and its WAL, or the PostgreSQL
  server's data directory when it is a private one), in Redis (every key
  dumped and read, on every master of a cluster), in the runtimes' files, in
  the AOF (every node's) or in any log.

The hub is read through the ``HubStore`` contract, so the same checks hold on
a SQLite and a PostgreSQL hub.
"""

from __future__ import annotations

import sqlite3
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

from hubstore import open_store
from hubstore.store import StoredEvent
from hubsync.core import keys
from hubsync.core.connections import RedisClient
from hubsync.core.entries import decode_fields
from hubsync.core.redis_values import as_text, entry_id_order
from tests.helpers.chaos import SoakCluster
from tests.helpers.chaos_inject import FORGERY_REASON, Injector, Key

Row = tuple[str, bytes]


def _read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)


def local_events(cluster: SoakCluster) -> tuple[dict[Key, Row], dict[Key, str], int]:
    """Every committed outbox row ``key -> (hash, bytes)``, its state, and local run events."""
    rows: dict[Key, Row] = {}
    states: dict[Key, str] = {}
    run_events = 0
    for runtime in cluster.runtimes:
        db = _read_only(runtime.store_path)
        try:
            local_keys = set(db.execute("SELECT run_id, sequence FROM run_events"))
            outbox = db.execute(
                "SELECT o.run_id, o.sequence, o.content_hash, p.sync_event, o.acked_at, o.outcome "
                "FROM outbox AS o LEFT JOIN outbox_payloads AS p ON p.seq = o.seq"
            ).fetchall()
            payloads = db.execute("SELECT count(*) FROM outbox_payloads").fetchone()[0]
        finally:
            db.close()
        # Each outbox row has its bytes and no bytes outlive their row (append and pruning
        # write both tables in one transaction).
        missing = [(run_id, sequence) for run_id, sequence, _, data, *_ in outbox if data is None]
        assert not missing and payloads == len(outbox), (
            f"runtime {runtime.index}: {len(missing)} outbox rows without bytes, "
            f"{payloads} payload rows for {len(outbox)} outbox rows"
        )
        outbox_keys = {(run_id, sequence) for run_id, sequence, *_ in outbox}
        assert local_keys == outbox_keys, (
            f"runtime {runtime.index}: local events and outbox rows differ "
            f"({len(local_keys ^ outbox_keys)} keys), so an append was not atomic"
        )
        run_events += len(local_keys)
        for run_id, sequence, digest, data, acked_at, outcome in outbox:
            key = (runtime.project_id, run_id, sequence)
            rows[key] = (digest, bytes(data))
            states[key] = "acked" if acked_at is not None else (outcome or "pending")
    return rows, states, run_events


def outbox_pending(cluster: SoakCluster) -> int:
    """Rows not yet acked nor parked, over every runtime."""
    total = 0
    for runtime in cluster.runtimes:
        db = _read_only(runtime.store_path)
        try:
            total += db.execute(
                "SELECT count(*) FROM outbox WHERE acked_at IS NULL AND outcome IS NULL"
            ).fetchone()[0]
        finally:
            db.close()
    return int(total)


def streams_settled(client: RedisClient, hub_projects: Iterable[str]) -> bool:
    """True when group ``hub`` has delivered every entry of every stream and has none pending."""
    for hub_project in hub_projects:
        stream = keys.events_stream(hub_project)
        info = client.xinfo_stream(stream)
        last = entry_id_order(info["last-generated-id"])
        for group in client.xinfo_groups(stream):
            if as_text(group["name"]) != keys.CONSUMER_GROUP:
                continue
            if group["pending"] or entry_id_order(group["last-delivered-id"]) < last:
                return False
    return True


def drained(cluster: SoakCluster, client: RedisClient) -> bool:
    """Nothing pending in any outbox, nothing undelivered or unacked on any stream."""
    hub_projects = {r.hub_project for r in cluster.runtimes}
    return outbox_pending(cluster) == 0 and streams_settled(client, hub_projects)


def hub_events(cluster: SoakCluster) -> Iterator[StoredEvent]:
    """Every event the hub store holds, page by page (keyset paging: each row once)."""
    with open_store(cluster.hub_url, create_schema=False) as hub:
        for hub_project in sorted({r.hub_project for r in cluster.runtimes}):
            after = None
            while page := hub.events(hub_project, after=after, limit=10_000):
                yield from page
                after = page[-1].position


def check_hub_equals_local(cluster: SoakCluster) -> dict[str, int]:
    """Hub rows == committed local events, key by key, same hash and bytes; no duplicates."""
    local, _, run_events = local_events(cluster)
    hub: dict[Key, Row] = {}
    rows = 0
    for event in hub_events(cluster):
        rows += 1
        hub[(event.project_id, event.run_id, event.sequence)] = (
            event.content_hash,
            bytes(event.record),
        )
    repeated = rows - len(hub)
    assert repeated == 0, f"{repeated} keys stored twice"
    missing = sorted(local.keys() - hub.keys())
    extra = sorted(hub.keys() - local.keys())
    differ = sorted(k for k in local.keys() & hub.keys() if local[k] != hub[k])
    assert not missing, f"{len(missing)} committed events never reached the hub: {missing[:5]}"
    assert not extra, f"{len(extra)} hub rows no runtime committed: {extra[:5]}"
    assert not differ, f"{len(differ)} hub rows differ from the local bytes: {differ[:5]}"
    return {"local_events": run_events, "outbox_rows": len(local), "hub_rows": len(hub)}


def check_outbox_terminal(cluster: SoakCluster, injector: Injector) -> dict[str, int]:
    """Every outbox row acked, or parked by an outcome an injected fault explains."""
    _, states, _ = local_events(cluster)
    explained = {c.key for c in injector.conflicts}
    explained |= {g.key for g in injector.garbage_entries if g.key is not None}
    counts = Counter(states.values())
    unexplained = sorted(k for k, s in states.items() if s != "acked" and k not in explained)
    assert not unexplained, (
        f"{len(unexplained)} outbox rows not acked and not explained by an injected fault: "
        f"{[(k, states[k]) for k in unexplained[:5]]}"
    )
    return {f"outbox_{state}": n for state, n in sorted(counts.items())}


def check_conflicts_alerted(
    cluster: SoakCluster, injector: Injector, client: RedisClient
) -> dict[str, int]:
    """Each signed conflicting offer is in ``sync_alerts`` as ``sequence_reused`` and each
    forgery as ``unauthenticated``, both on the alert stream too; nothing else is."""
    with open_store(cluster.hub_url, create_schema=False) as hub:
        alerts = hub.alerts(limit=1_000_000)
    table = {
        (a.project_id, a.run_id, a.sequence, a.offered_hash): (str(a.reason), a.existing_hash)
        for a in alerts
    }
    streamed: set[tuple[str, str, int, str, str]] = set()
    for hub_project in {r.hub_project for r in cluster.runtimes}:
        for _, raw in client.xrange(keys.alerts_stream(hub_project)):
            f = decode_fields(raw)
            streamed.add(
                (
                    f["project_id"].decode(),
                    f["run_id"].decode(),
                    int(f["sequence"]),
                    f["offered_hash"].decode(),
                    f["reason"].decode(),
                )
            )
    expected = set()
    for conflict in injector.conflicts:
        alert_key = (*conflict.key, conflict.forged_hash)
        expected.add(alert_key)
        assert table.get(alert_key) == ("sequence_reused", conflict.genuine_hash), (
            f"conflicting offer for {conflict.key} is not in sync_alerts as sequence_reused "
            f"over the genuine hash (found {table.get(alert_key)})"
        )
        assert (*alert_key, "sequence_reused") in streamed, (
            f"conflicting offer for {conflict.key} raised no stream alert"
        )
    for forgery in injector.forgeries:
        alert_key = (*forgery.key, forgery.forged_hash)
        expected.add(alert_key)
        assert table.get(alert_key) == (FORGERY_REASON, None), (
            f"{forgery.how} forgery for {forgery.key} is not in sync_alerts as "
            f"{FORGERY_REASON} (found {table.get(alert_key)})"
        )
        assert (*alert_key, FORGERY_REASON) in streamed, (
            f"{forgery.how} forgery for {forgery.key} raised no stream alert"
        )
    for garbage in injector.garbage_entries:
        if garbage.alert is not None:
            expected.add(garbage.alert)
            assert table.get(garbage.alert) == (FORGERY_REASON, None), (
                f"{garbage.kind} entry {garbage.entry_id} is not in sync_alerts as "
                f"{FORGERY_REASON} (found {table.get(garbage.alert)})"
            )
    assert set(table) <= expected, f"alerts no injection explains: {sorted(set(table) - expected)}"
    return {
        "conflicts_injected": len(injector.conflicts),
        "forgeries_injected": len(injector.forgeries),
        "alerts": len(table),
    }


def check_forgeries_told_nothing(cluster: SoakCluster, injector: Injector) -> dict[str, int]:
    """No relay heard of a forgery: none logged a verdict on other bytes under a forged key
    (as each does for a signed conflict, whose outcome names bytes its row does not hold)."""
    logs = "\n".join(relay.log_text() for relay in cluster.relays)

    def told(key: Key) -> bool:
        project_id, run_id, sequence = key
        return f"project {project_id} run {run_id} sequence {sequence};" in logs

    conflicts_told = sum(told(c.key) for c in injector.conflicts)
    if injector.conflicts:
        # the line looked for below is the one relays do write for a verdict on other bytes
        assert conflicts_told, "no relay logged the verdict on any signed conflicting offer"
    conflicted = {c.key for c in injector.conflicts}
    heard = [f.key for f in injector.forgeries if f.key not in conflicted and told(f.key)]
    assert not heard, f"relays were told about forgeries: {heard[:5]}"
    return {"conflicts_told_to_relays": conflicts_told}


def check_forged_acks_ignored(cluster: SoakCluster, injector: Injector) -> dict[str, int]:
    """No forged ack was applied: the rows it claimed accepted (their entries deleted) and
    those it claimed parked are all acked, the former being in the hub; and each targeted
    runtime's relay logged that it ignored an outcomes entry its hub did not sign."""
    _, states, _ = local_events(cluster)
    logs = {relay.name: relay.log_text() for relay in cluster.relays}
    by_runtime = {r.runtime_id: f"relay-{r.index}" for r in cluster.runtimes}
    claimed = 0
    for forged in injector.forged_acks:
        for key in (*forged.deleted, *forged.parked):
            claimed += 1
            assert states.get(key) == "acked", (
                f"a forged ack ({forged.how}) decided row {key}: {states.get(key)}"
            )
        assert "security: ignored outcomes entry" in logs[by_runtime[forged.runtime_id]], (
            f"{forged.runtime_id}'s relay never said it ignored a forged ack"
        )
    return {"forged_acks_injected": len(injector.forged_acks), "forged_ack_rows": claimed}


def check_garbage_dead_lettered(
    cluster: SoakCluster, injector: Injector, client: RedisClient
) -> dict[str, int]:
    """Every garbage entry dead-lettered with its reason, every forgery as unauthenticated;
    genuine entries only for over-delivery."""
    by_source: dict[str, list[str]] = defaultdict(list)
    reasons: Counter[str] = Counter()
    for hub_project in {r.hub_project for r in cluster.runtimes}:
        for _, raw in client.xrange(keys.dead_stream(hub_project)):
            f = decode_fields(raw)
            reason = f["reason"].decode()
            by_source[f["source_id"].decode()].append(reason)
            reasons[reason] += 1
    expected = [(g.kind, g.entry_id, g.expected_reason) for g in injector.garbage_entries]
    expected += [(f"{f.how} forgery", f.entry_id, FORGERY_REASON) for f in injector.forgeries]
    garbage_ids = {entry_id for _, entry_id, _ in expected}
    for kind, entry_id, reason in expected:
        got = by_source.get(entry_id, [])
        assert reason in got, (
            f"{kind} entry {entry_id} was not dead-lettered as {reason} (got {got})"
        )
    stray = {
        source: got
        for source, got in by_source.items()
        if source not in garbage_ids and set(got) != {"max_deliveries"}
    }
    assert not stray, f"genuine entries dead-lettered: {sorted(stray.items())[:5]}"
    over_delivered = sum(1 for s in by_source if s not in garbage_ids)
    return {
        "garbage_injected": len(injector.garbage_entries),
        "forgeries_dead_lettered": len(injector.forgeries),
        "dead_letters": sum(reasons.values()),
        "dead_max_deliveries_genuine": over_delivered,
    } | {f"dead_{reason}": n for reason, n in sorted(reasons.items())}


def redis_contents(client: RedisClient) -> tuple[bytes, int]:
    """DUMP of every key plus its readable contents (a stream's entries, a hash's fields...)."""
    parts: list[bytes] = []
    count = 0
    for key in client.scan_iter(count=500):
        count += 1
        parts.append(key)
        dumped = client.dump(key)
        if dumped:
            parts.append(bytes(dumped))  # type: ignore[arg-type]
        kind = as_text(client.type(key))
        if kind == "string":
            parts.append(bytes(client.get(key) or b""))  # type: ignore[arg-type]
        elif kind == "hash":
            for k, v in client.hgetall(key).items():  # type: ignore[union-attr]
                parts += [k, v]
        elif kind == "set":
            parts += list(client.smembers(key))  # type: ignore[arg-type]
        elif kind == "list":
            parts += list(client.lrange(key, 0, -1))  # type: ignore[arg-type]
        elif kind == "zset":
            parts += [m for m, _ in client.zrange(key, 0, -1, withscores=True)]  # type: ignore[union-attr]
        elif kind == "stream":
            for _, fields in client.xrange(key):
                for k, v in fields.items():
                    parts += [k, v]
    return b"\n".join(parts), count


def files_under(*roots: Path) -> list[Path]:
    """Every regular file below ``roots``."""
    return sorted(p for root in roots if root.exists() for p in root.rglob("*") if p.is_file())


def check_no_secret(cluster: SoakCluster, client: RedisClient) -> dict[str, int]:
    """No planted secret in Redis, the hub DB, the runtimes' files or any log (redis running)."""
    needles = cluster.planted.needles()
    blob, redis_keys = redis_contents(client)
    found = [n for n in needles if n in blob]
    assert not found, "a planted secret is in Redis"
    scanned = 0
    for path in files_under(
        cluster.base / "hub",
        *cluster.hub_directories,
        cluster.logs,
        *[r.state_dir for r in cluster.runtimes],
    ):
        data = path.read_bytes()
        scanned += len(data)
        assert not any(n in data for n in needles), f"a planted secret is in {path}"
    return {
        "redis_keys_scanned": redis_keys,
        "redis_bytes_scanned": len(blob),
        "file_bytes_scanned": scanned,
    }


def check_no_secret_on_disk_of_redis(cluster: SoakCluster) -> int:
    """No planted secret in the AOF or redis.log (after redis stopped); bytes scanned."""
    needles = cluster.planted.needles()
    scanned = 0
    for path in files_under(cluster.redis.directory):
        data = path.read_bytes()
        scanned += len(data)
        assert not any(n in data for n in needles), f"a planted secret is in {path}"
    return scanned


def check_redaction_happened(cluster: SoakCluster) -> dict[str, int]:
    """The planted texts did cross in allowlisted fields: their redaction markers are in the hub."""
    markers = {kind: f"[REDACTED:{kind}]".encode() for kind in ("env", "github_token")}
    counts = dict.fromkeys(markers, 0)
    for event in hub_events(cluster):
        for kind, marker in markers.items():
            counts[kind] += marker in event.record
    assert all(counts.values()), f"planted secrets never reached a crossing field: {counts}"
    return {f"hub_rows_redacted_{kind}": n for kind, n in counts.items()}
