"""``hubsync hub restore``: make a hub store restored from a backup whole again.

The steps are ``consumers.stream.restore``'s: the revocations and re-keys made since the
backup applied again from the signed records in Redis, the namespace's mark accepted as
``consume --accept-restore`` does, and every active runtime asked to resync from the
restored store's own run cursors (``hubsync resync``'s request). One line per step, or one
JSON document; ``--wait`` follows the runtimes' progress.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from hubsync.cli.options import (
    admin_redis_options,
    hub_options,
    json_option,
    open_hub_store,
    required_hub_url,
)
from hubsync.cli.resync import asked_document, report_asked, wait_option
from hubsync.core.clock import utc_now
from hubsync.core.errors import ConfigError

if TYPE_CHECKING:
    from consumers.stream.restore import KeyRetired
    from hubstore.resyncs import ResyncRecord


@click.command(
    "restore",
    epilog="""\b
Examples:
  hubsync hub restore --hub-db /var/lib/hubsync/hub.db --redis-url redis://admin@redis:6379/0 \\
      --redis-password-file admin.pw
  hubsync hub restore --hub-url postgresql://hubsync_admin@db.internal/hubsync \\
      --redis-url redis://admin@redis:6379/0 --wait 900 --json
""",
)
@hub_options
@admin_redis_options(
    "The Redis of the hub's namespace. Log in as a user allowed to read hubsync:revocations "
    "and write it, the hub mark (hubsync:hub:mark) and the runtimes' acks streams: the "
    "administrator, or the consumers' user.",
    required=True,
)
@wait_option
@json_option
def restore(
    hub_url: str | None,
    hub_db: Path | None,
    redis_url: str,
    redis_password_file: Path | None,
    wait_seconds: float | None,
    as_json: bool,
) -> None:
    """Make a hub store restored from a backup (a file copied back, pg_restore,
    point-in-time recovery, a standby promoted) whole again, from the runtimes.

    1. Re-applies every revocation and re-key made since the backup: a runtime
    whose key Redis holds a revocation of, signed with that very key, is revoked
    in the store again (a re-keyed one too: its new key is not in the backup,
    so enroll it again). 2. Accepts the store as the hub's, lowering the
    namespace's mark as `hubsync consume --accept-restore` does, so the
    consumers start. 3. Asks every active runtime to resync: its relay puts
    back to pending what the store lacks (beyond the store's run cursors),
    derives again what retention pruned, and resends it; what the store holds
    comes back duplicate. Run the consumers and relays as usual afterwards.
    Progress (runtimes asked, done, events re-accepted) shows in hubsync
    status, or here with --wait. Running it again asks again; nothing is
    stored twice. What no runtime holds any more (an event lost before it was
    acked) cannot come back.
    """
    from consumers.stream.hub_binding import accept_restore, bind_namespace
    from consumers.stream.restore import active_runtimes, reapply_revocations
    from consumers.stream.resync_requests import ResyncAsk, ask_resync
    from hubsync.core.connections import RedisTarget, probe

    url = required_hub_url(hub_url, hub_db)
    client = probe(RedisTarget.of(redis_url, redis_password_file))
    try:
        with open_hub_store(url) as store:
            hub_id = store.hub_id()
            if hub_id is None:
                raise ConfigError("--hub-url: this hub store has no hub id; nothing to restore")
            bind_namespace(client, hub_id, claim=False)  # another hub's namespace: refused
            retired = reapply_revocations(client, store, utc_now())
            before, counter = accept_restore(client, hub_id, store)
            asks = [ResyncAsk(r, p) for r in active_runtimes(store) for p in r.hub_projects]
            group_id, records = ask_resync(client, store, hub_id, asks, reason="restore")
    finally:
        client.close()
    document = {
        "hub_id": hub_id,
        "revocations": [
            {
                "runtime_id": k.runtime_id,
                "fingerprint": k.fingerprint,
                "effective_at": k.effective_at,
                "revoked": k.revoked,
            }
            for k in retired
        ],
        "mark": {"before": before, "after": counter},
        "group_id": group_id,
        "asked": asked_document(records),
    }
    lines = _lines(retired, before, counter, records)
    report_asked(url, group_id, wait_seconds, as_json, document, lines)


def _lines(
    retired: list[KeyRetired], before: int | None, counter: int, records: list[ResyncRecord]
) -> list[str]:
    revoked = [k for k in retired if k.revoked]
    ending = [k for k in retired if not k.revoked]
    lines = [
        f"revocations: {len(revoked)} runtime(s) revoked again"
        + (f" ({', '.join(k.runtime_id for k in revoked)})" if revoked else "")
        + " from the signed records in Redis"
    ]
    for k in ending:
        lines.append(
            f"revocations: runtime {k.runtime_id} was given a new key after the backup (its "
            f"key here ends at {k.effective_at}); enroll it again: hubsync enroll {k.runtime_id}"
        )
    shown = "none" if before is None else str(before)
    lines.append(f"mark: the namespace's mark set from {shown} to this store's {counter} commits")
    runtimes = sorted({r.runtime_id for r in records})
    lines.append(
        f"resync: asked {len(runtimes)} runtime(s) ({len(records)} requests) to resend what "
        "lies beyond this store's run cursors"
    )
    return lines
