"""A hub's resync request applied to one project's outbox, and how far the hub got with it.

A verified request (``hubsync.core.resync``) says from where the hub may lack this
runtime's events. Applying one part of it to a store, in one write transaction:

* every **acked** row of a covered run beyond the hub's cursor (or recorded since the
  request's time) goes back to pending, due for a resend now; one whose bytes hold a
  secret this store's redactor knows is derived again first (new bytes, new hash: the hub
  lacks the old ones, so it accepts the new);
* every local event of such a run with no outbox row left (retention pruned it) is
  derived again from ``run_events`` with the append's own derivation
  (``EventDeriver.rederive``) and queued as a new pending row: the same bytes, hence the
  same hash, as the hub had;
* pending rows stay as they are, and parked (``conflict``, ``rejected``) rows stay parked.

Normal sending does the rest; what the hub still holds comes back ``duplicate``.

The request is remembered in ``relay_state`` (``resync:<request id>``) in the same
transaction: its parts applied, the outbox ``seq`` ranges it put back, and whether the hub
has judged them all. A part applied already is skipped, so a replayed request changes
nothing. The rows of a request still open are kept from retention (``resync_floor``) so
its progress can be counted from the rows themselves.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from dataclasses import dataclass

from hubsync.core.clock import parse_timestamp
from hubsync.core.resync import REPORT_COUNTS, ResyncRequest
from hubsync.core.sqlite import Database
from producers.derivation import EventDeriver
from producers.errors import DerivationError
from producers.store.outbox_outcomes import seq_ranges

log = logging.getLogger(__name__)

RESYNC_PREFIX = "resync:"
"""``relay_state`` names of the requests a store has seen: ``resync:<request id>``."""


@dataclass(frozen=True, slots=True)
class ResyncProgress:
    """One request in one store: rows put back, and what the hub has said of them since,
    under the names of a report's counts (``REPORT_COUNTS``: requeued, rederived, then
    accepted, duplicate, refused and pending)."""

    request_id: str
    hub_project: str
    counts: dict[str, int]


def _name(request_id: str) -> str:
    return RESYNC_PREFIX + request_id


def _record(c: sqlite3.Connection, request_id: str) -> dict[str, object] | None:
    row = c.execute("SELECT value FROM relay_state WHERE name = ?", (_name(request_id),)).fetchone()
    return None if row is None else dict(json.loads(row[0]))


def _save(c: sqlite3.Connection, request_id: str, record: dict[str, object]) -> None:
    c.execute(
        "INSERT INTO relay_state (name, value) VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        (_name(request_id), json.dumps(record, sort_keys=True)),
    )


def apply_resync(db: Database, deriver: EventDeriver, request: ResyncRequest, now: float) -> bool:
    """Apply one part of ``request`` to the store of ``deriver``'s project; False when this
    part was applied before (nothing changes then)."""
    project_id = deriver.identity.project_id

    def apply(c: sqlite3.Connection) -> bool:
        record = _record(c, request.request_id) or {
            "hub_project": request.hub_project,
            "parts": [],
            "of": request.parts,
            "seqs": [],
            "requeued": 0,
            "rederived": 0,
            "done": False,
        }
        parts = list(record["parts"])  # type: ignore[call-overload]
        if request.part in parts:
            return False
        seqs: list[int] = []
        requeued = rederived = 0
        if request.scope.includes(project_id):
            for run_id in _runs(c):
                if request.scope.includes(project_id, run_id) and (
                    request.point.since is not None or request.point.covers(project_id, run_id)
                ):
                    put_back, derived = _resync_run(c, deriver, request, run_id, now, seqs)
                    requeued += put_back
                    rederived += derived
        ranges = [list(r) for r in record["seqs"]]  # type: ignore[attr-defined]
        record.update(
            parts=sorted([*parts, request.part]),
            seqs=ranges + [list(r) for r in seq_ranges(sorted(seqs))],
            requeued=int(record["requeued"]) + requeued,  # type: ignore[call-overload]
            rederived=int(record["rederived"]) + rederived,  # type: ignore[call-overload]
        )
        _save(c, request.request_id, record)
        return True

    return db.write(apply)


def _runs(c: sqlite3.Connection) -> list[str]:
    return [
        row[0]
        for row in c.execute(
            "SELECT run_id FROM run_events UNION SELECT run_id FROM outbox ORDER BY 1"
        )
    ]


def _resync_run(
    c: sqlite3.Connection,
    deriver: EventDeriver,
    request: ResyncRequest,
    run_id: str,
    now: float,
    seqs: list[int],
) -> tuple[int, int]:
    """Put back the acked rows of one run beyond the point and re-derive its pruned ones."""
    point = request.point
    if point.since is None:
        # sequences the hub holds every one of up to the cursor
        outbox_beyond, local_beyond = "o.sequence > ?", "e.sequence > ?"
        bound: float = point.cursor_of(deriver.identity.project_id, run_id)
    else:
        outbox_beyond, local_beyond = "o.created_at >= ?", "e.recorded_at >= ?"
        bound = parse_timestamp(point.since).timestamp()
    acked = c.execute(
        "SELECT o.seq, o.sequence, p.sync_event FROM outbox AS o "
        "JOIN outbox_payloads AS p ON p.seq = o.seq "
        f"WHERE o.run_id = ? AND {outbox_beyond} AND o.acked_at IS NOT NULL ORDER BY o.seq",
        (run_id, bound),
    ).fetchall()
    for seq, sequence, data in acked:
        if deriver.redactor.contains_secret(bytes(data).decode("utf-8", "replace")):
            _derive_again(c, deriver, seq, run_id, sequence)
        c.execute(
            "UPDATE outbox SET acked_at = NULL, outcome = NULL, outcome_reason = NULL, "
            "outcome_at = NULL, attempts = MAX(attempts, 1), next_attempt_at = ? WHERE seq = ?",
            (now, seq),
        )
        seqs.append(seq)
    pruned = c.execute(
        "SELECT e.sequence, e.event_type, e.occurred_at, e.payload FROM run_events AS e "
        f"WHERE e.run_id = ? AND {local_beyond} AND NOT EXISTS (SELECT 1 FROM outbox AS o "
        "WHERE o.run_id = e.run_id AND o.sequence = e.sequence) ORDER BY e.sequence",
        (run_id, bound),
    ).fetchall()
    rederived = 0
    for sequence, event_type, occurred_at, payload in pruned:
        try:
            data, digest = deriver.rederive(run_id, sequence, event_type, occurred_at, payload)
        except DerivationError as exc:
            log.warning("resync: run %s sequence %d cannot be derived again (%s)", run_id,
                        sequence, exc)  # fmt: skip
            continue
        seq = c.execute(
            "INSERT INTO outbox (run_id, sequence, event_type, content_hash, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (run_id, sequence, event_type, digest, now),
        ).lastrowid
        c.execute("INSERT INTO outbox_payloads (seq, sync_event) VALUES (?, ?)", (seq, data))
        assert seq is not None
        seqs.append(seq)
        rederived += 1
    return len(acked), rederived


def _derive_again(
    c: sqlite3.Connection, deriver: EventDeriver, seq: int, run_id: str, sequence: int
) -> None:
    """New bytes for an acked row whose bytes hold a secret known now, from its local event
    (scrubbed when the secret was registered); without one the row keeps its bytes."""
    row = c.execute(
        "SELECT event_type, occurred_at, payload FROM run_events WHERE run_id = ? AND sequence = ?",
        (run_id, sequence),
    ).fetchone()
    if row is None:
        return
    data, digest = deriver.rederive(run_id, sequence, *row)
    c.execute("UPDATE outbox SET content_hash = ? WHERE seq = ?", (digest, seq))
    c.execute("UPDATE outbox_payloads SET sync_event = ? WHERE seq = ?", (data, seq))


def resync_progress(db: Database) -> list[ResyncProgress]:
    """Every request this store has seen and not yet found done, with its rows' states."""

    def read(c: sqlite3.Connection) -> list[ResyncProgress]:
        found = []
        rows = c.execute(
            "SELECT substr(name, ?), value FROM relay_state WHERE name LIKE ? ORDER BY name",
            (len(RESYNC_PREFIX) + 1, RESYNC_PREFIX + "%"),
        ).fetchall()
        for request_id, value in rows:
            record = json.loads(value)
            if record["done"] or len(record["parts"]) < record["of"]:
                continue  # judged already, or parts still to come
            counts = dict.fromkeys(REPORT_COUNTS, 0)
            counts.update(requeued=record["requeued"], rederived=record["rederived"])
            for first, last in record["seqs"]:
                for state, n in c.execute(
                    "SELECT CASE WHEN acked_at IS NOT NULL THEN coalesce(outcome, 'accepted') "
                    "WHEN outcome IS NOT NULL THEN 'refused' ELSE 'pending' END, count(*) "
                    "FROM outbox WHERE seq BETWEEN ? AND ? GROUP BY 1",
                    (first, last),
                ):
                    counts[state] = counts.get(state, 0) + n
            found.append(ResyncProgress(request_id, record["hub_project"], counts))
        return found

    return db.read(read)


def close_resync(db: Database, request_id: str) -> None:
    """Remember that the hub judged every row of ``request_id``: its rows may be pruned."""

    def close(c: sqlite3.Connection) -> None:
        record = _record(c, request_id)
        if record is not None:
            record["done"] = True
            _save(c, request_id, record)

    db.write(close)


def resync_floor(db: Database) -> int | None:
    """The lowest outbox ``seq`` an open request put back, which retention must keep; None
    when no request is open."""
    lowest = None
    for progress_seqs in db.read(
        lambda c: [
            json.loads(value)
            for (value,) in c.execute(
                "SELECT value FROM relay_state WHERE name LIKE ?", (RESYNC_PREFIX + "%",)
            )
        ]
    ):
        if progress_seqs["done"] or not progress_seqs["seqs"]:
            continue
        first = min(first for first, _ in progress_seqs["seqs"])
        lowest = first if lowest is None else min(lowest, first)
    return lowest
