"""The hub's side of a resync: signed requests to runtimes, from the hub store's own cursors.

``ask_resync`` publishes one request per runtime and hub project on the runtime's acks
stream, signed with the runtime's current key exactly as the hub's outcomes are (the relay
believes nothing else), after keeping it in the hub store (``HubStore.record_resyncs``) so
that the runtime's signed progress reports find it. The resync point is exact: the hub
store's cursor of every run of the runtime it holds (``HubStore.runs``), in parts of
``CURSORS_PER_PART`` runs; or, for an operator's rewind, a time.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

from hubstore.resyncs import ResyncRecord
from hubstore.store import EnrolledRuntime, HubStore, RunPosition
from hubsync.core import keys
from hubsync.core.clock import utc_now_iso
from hubsync.core.connections import RedisClient
from hubsync.core.resync import (
    ResyncPoint,
    ResyncRequest,
    ResyncScope,
    RunCursor,
    cursor_parts,
)
from hubsync.core.signing import RuntimeKey

RUNS_PAGE = 1000


@dataclass(frozen=True, slots=True)
class ResyncAsk:
    """What to ask of one runtime: its hub project, which of its rows, from when (None:
    from the hub's run cursors)."""

    runtime: EnrolledRuntime
    hub_project: str
    scope: ResyncScope = field(default_factory=ResyncScope)
    since: str | None = None


def run_cursors(
    store: HubStore, hub_project: str, runtime_id: str, scope: ResyncScope
) -> list[RunCursor]:
    """The hub's cursor of every run of ``runtime_id`` in ``hub_project`` (within ``scope``)."""
    cursors = []
    after: RunPosition | None = None
    while True:
        page = store.runs(hub_project, after, RUNS_PAGE, project_id=scope.project_id,
                          gaps_per_run=0)  # fmt: skip
        for run in page:
            if run.home_runtime_id == runtime_id and scope.includes(run.project_id, run.run_id):
                cursors.append(RunCursor(run.project_id, run.run_id, run.sync_cursor))
        if len(page) < RUNS_PAGE:
            return cursors
        after = page[-1].position


def ask_resync(
    client: RedisClient,
    store: HubStore,
    hub_id: str,
    asks: Sequence[ResyncAsk],
    *,
    reason: str,
) -> tuple[str, list[ResyncRecord]]:
    """Keep, then publish, one signed request per ask, as one group (``reason``: ``restore``
    or ``resync``); the group's id and the records kept."""
    group_id = "rs-" + secrets.token_hex(6)
    issued_at = utc_now_iso()
    planned: list[tuple[ResyncRecord, list[dict[str, str]]]] = []
    for ask in asks:
        runtime = ask.runtime
        assert runtime.key is not None  # the caller asks active runtimes only
        if ask.since is not None:
            points = [ResyncPoint(since=ask.since)]
        else:
            points = cursor_parts(
                run_cursors(store, ask.hub_project, runtime.runtime_id, ask.scope)
            )
        request_id = "rq-" + secrets.token_hex(8)
        key = RuntimeKey(runtime.key)
        entries = [
            ResyncRequest(
                hub_id=hub_id,
                hub_project=ask.hub_project,
                runtime_id=runtime.runtime_id,
                request_id=request_id,
                issued_at=issued_at,
                scope=ask.scope,
                point=point,
                part=n,
                parts=len(points),
            ).signed_fields(key)
            for n, point in enumerate(points, start=1)
        ]
        record = ResyncRecord(
            request_id=request_id,
            group_id=group_id,
            runtime_id=runtime.runtime_id,
            hub_project=ask.hub_project,
            reason=reason,
            scope=ask.scope.encoded(),
            point="run cursors" if ask.since is None else f"since {ask.since}",
            parts=len(points),
            asked_at=issued_at,
        )
        planned.append((record, entries))
    records = [record for record, _ in planned]
    store.record_resyncs(records)
    pipe = client.pipeline(transaction=False)
    for record, entries in planned:
        stream = keys.acks_stream(record.hub_project, record.runtime_id)
        for fields in entries:
            pipe.xadd(stream, fields)  # type: ignore[arg-type]
    pipe.execute()
    return group_id, records
