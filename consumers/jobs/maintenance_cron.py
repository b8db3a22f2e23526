"""rq cron configuration: run the maintenance job on ``hubsync-effects`` periodically.

Start the scheduler with rq's own CLI, and any ``rq worker hubsync-effects`` runs it::

    HUBSYNC_EFFECTS_LEDGER=/var/lib/hubsync/effects.db \\
        rq cron consumers.jobs.maintenance_cron --url redis://127.0.0.1:6379/0

Settings: ``HUBSYNC_MAINTENANCE_INTERVAL`` (seconds, default 3600),
``HUBSYNC_EFFECTS_RETENTION``, ``HUBSYNC_DEAD_CONSUMER_IDLE``, ``HUBSYNC_EFFECTS_LEDGER``,
``HUBSYNC_HUB_URL`` (or its shorthand ``HUBSYNC_HUB_DB``) and ``HUBSYNC_HUB_RETENTION`` (seconds, default 90 days).
"""

from __future__ import annotations

from rq import cron

from consumers.jobs.maintenance import MaintenanceSettings, run_maintenance
from hubsync.core.keys import EFFECTS_QUEUE

_settings = MaintenanceSettings()

cron.register(
    run_maintenance,
    queue_name=EFFECTS_QUEUE,
    kwargs={
        "ledger_path": str(_settings.effects_ledger) if _settings.effects_ledger else None,
        "effects_retention": _settings.effects_retention,
        "dead_consumer_idle": _settings.dead_consumer_idle,
        "hub_url": _settings.hub_url,
        "hub_db": str(_settings.hub_db) if _settings.hub_db else None,
        "hub_retention": _settings.hub_retention,
    },
    interval=_settings.maintenance_interval,
    name="hubsync-maintenance",
)
