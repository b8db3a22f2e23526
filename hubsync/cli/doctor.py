"""``hubsync doctor``: check a deployment, one line per check, exit 1 if any fails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hubsync.cli import exit_codes
from hubsync.cli.options import (
    deployment_options,
    json_option,
    shown_store,
)
from hubsync.core.settings import hub_url_of

if TYPE_CHECKING:
    from hubsync.core.connections import RedisTarget


@click.command(
    epilog="""\b
Examples:
  hubsync doctor                                            Redis only
  hubsync doctor --hub-db /var/lib/hubsync/hub.db           + the hub store
  hubsync doctor --state-dir /var/lib/hubsync/runtime --json  + a runtime, as JSON
\b
Each line: "ok   CHECK: what was found", "warn CHECK: a risk; what to do",
"FAIL CHECK: what is wrong; what to do" or "skip CHECK: why".
\b
Exit codes: 0 no check failed (warnings allowed), 1 a check failed (an
unreachable Redis included), 2 bad arguments or a malformed URL.
"""
)
@deployment_options
@json_option
def doctor(
    redis: RedisTarget,
    hub_url: str | None,
    hub_db: Path | None,
    state_dir: Path | None,
    as_json: bool,
) -> int:
    """Check a deployment: Redis's version, eviction policy, AOF and consumer groups, the hub
    store's schema and the runtime's state dir, one line per check.

    Redis is always checked (--redis-url has a default); the hub store only with
    --hub-url or --hub-db, the runtime only with --state-dir. It creates nothing:
    it opens only stores that exist, as the relay and the hub consumers do.
    """
    # The checks import Redis, the hub store and the runtime: loaded only when doctor runs.
    from hubstore.factory import url_scheme
    from hubsync.doctor import run_checks

    url = hub_url_of(hub_url, hub_db)
    if url is not None:
        url_scheme(url)  # an unknown scheme is a usage error, not a failed check
    checks = run_checks(redis, url, "" if url is None else shown_store(url), state_dir)
    failed = [check.name for check in checks if check.failed]
    if as_json:
        document = {
            "ok": not failed,
            "redis_url": redis.shown,
            "failed": failed,
            "checks": [check.as_dict() for check in checks],
        }
        click.echo(json.dumps(document, sort_keys=True))
    else:
        for check in checks:
            click.echo(check.line())
    return exit_codes.FAILURE if failed else exit_codes.OK
