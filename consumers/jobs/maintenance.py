"""The periodic maintenance job, run by RQ on ``hubsync-effects``.

It purges committed effects older than the retention window from a runtime's
effects ledger, purges alerts and presence rows older than the hub retention
window from the hub store (events are kept), and removes hub consumers that have been idle past a threshold
and own no pending entry (their entries, if any, are left for XAUTOCLAIM by the
live consumers). Parked ``blocked_uncertain`` and in-flight effects are never
purged, and leases are never touched: their fences must outlive everything.

Scheduled with rq's cron scheduler (``consumers/jobs/maintenance_cron.py``)::

    rq cron consumers.jobs.maintenance_cron --url redis://127.0.0.1:6379/0
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import redis
from pydantic import Field

from consumers.jobs.job_connection import job_connection
from consumers.stream.reclaim import remove_idle_consumers
from consumers.views.projects import known_hub_projects
from consumers.views.queue_status import events_streams
from hubstore.factory import open_store
from hubstore.redis_functions import functions_for
from hubsync.core.settings import HubsyncSettings, hub_url_of
from producers.effects.ledger import EffectsLedger

log = logging.getLogger(__name__)


class MaintenanceSettings(HubsyncSettings):
    """Settings of the maintenance job (env prefix ``HUBSYNC_``)."""

    effects_ledger: Path | None = Field(
        default=None, description="effects ledger to purge (none: skip the purge)"
    )
    effects_retention: float = Field(
        default=30 * 86_400.0, ge=0, description="keep committed effects this many seconds"
    )
    hub_url: str | None = Field(
        default=None, description="hub store whose old alerts and presence to purge (a URL)"
    )
    hub_db: Path | None = Field(
        default=None, description="shorthand of hub_url: a hub SQLite file (sqlite:///<path>)"
    )
    hub_retention: float = Field(
        default=90 * 86_400.0, ge=0, description="keep hub alerts and presence this many seconds"
    )
    dead_consumer_idle: float = Field(
        default=3_600.0, ge=0, description="remove hub consumers idle this many seconds"
    )
    maintenance_interval: int = Field(
        default=3_600, ge=1, description="seconds between maintenance runs (rq cron)"
    )


def run_maintenance(
    ledger_path: str | None = None,
    effects_retention: float = 30 * 86_400.0,
    dead_consumer_idle: float = 3_600.0,
    redis_url: str | None = None,
    hub_db: str | None = None,
    hub_retention: float = 90 * 86_400.0,
    hub_url: str | None = None,
) -> dict[str, Any]:
    """Purge old committed effects, old hub alerts and presence, dead consumers; report it.

    The hub store is ``hub_url`` or its shorthand ``hub_db`` (a SQLite path);
    with neither, hub rows are not purged. The store is never created here.
    """
    report: dict[str, Any] = {
        "purged_effects": 0,
        "purged_alerts": 0,
        "purged_presence": 0,
        "removed_consumers": {},
    }
    store_url = hub_url_of(hub_url, hub_db)
    if store_url:
        with open_store(store_url, create_schema=False) as store:
            purged = store.purge(timedelta(seconds=hub_retention))
        report["purged_alerts"], report["purged_presence"] = purged.alerts, purged.presence
    if ledger_path:
        ledger = EffectsLedger(Path(ledger_path))
        try:
            report["purged_effects"] = ledger.purge_committed(effects_retention)
        finally:
            ledger.close()
    client = job_connection(redis_url, "run_maintenance")
    functions = functions_for(client)
    for project in known_hub_projects(client):
        for stream in events_streams(client, project):
            try:
                removed = remove_idle_consumers(
                    client, functions, stream, me="", idle_ms=int(dead_consumer_idle * 1000)
                )
            except redis.ResponseError as exc:  # no group yet, or not a stream
                log.debug("maintenance: %s skipped: %s", stream, exc)
                continue
            if removed:
                report["removed_consumers"].setdefault(project, []).extend(removed)
    log.info(
        "maintenance: purged %s effects, %s alerts, %s presence rows; removed consumers %s",
        report["purged_effects"],
        report["purged_alerts"],
        report["purged_presence"],
        report["removed_consumers"],
    )
    return report
