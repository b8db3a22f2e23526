"""Each enrolled runtime's presence, as the hub store keeps it, exported as gauges.

Read every reclaim interval (``HubStore.presence``), so a consumer started
after a runtime died still reports how long it has been silent: the age of
its latest beat on the hub's clock (a runtime with a skewed clock cannot look
alive) and the backlog the beat reported. Only enrolled runtimes are
exported, and the gauges are set anew each time, so a revoked runtime's
series go away instead of freezing at their last value.
"""

from __future__ import annotations

from collections.abc import Collection

from hubstore.store import HubStore
from hubsync.core import metrics
from hubsync.core.clock import parse_timestamp, utc_now


def export_presence(store: HubStore, enrolled: Collection[tuple[str, str]]) -> int:
    """Set the presence gauges of each (hub project, runtime) in ``enrolled`` the store has
    heard from; how many it set."""
    now = utc_now()
    records = [r for r in store.presence() if (r.hub_project, r.runtime_id) in enrolled]
    metrics.RUNTIME_HEARTBEAT_AGE.clear()
    metrics.RUNTIME_REPORTED_BACKLOG.clear()
    for record in records:
        labels = (record.hub_project, record.runtime_id)
        age = max(0.0, (now - parse_timestamp(record.heartbeat)).total_seconds())
        metrics.RUNTIME_HEARTBEAT_AGE.labels(*labels).set(age)
        metrics.RUNTIME_REPORTED_BACKLOG.labels(*labels).set(record.beat.backlog)
    return len(records)
