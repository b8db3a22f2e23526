"""The chaos soak's end checks: ``hubsync.faults.invariants``' (the demo's too), given the
soak's processes and files.

Once everything has drained, every check runs and the figures are returned, or
``InvariantBroken`` names every broken invariant with its first offending keys (never
event bytes). The planted secrets are looked for in Redis (every key dumped and read, on
every master of a cluster), the hub's files (the SQLite file and its WAL, or the private
PostgreSQL server's data directory), the runtimes' files and every log while Redis runs;
then, once it stopped, in its own files (every node's AOF and log).
"""

from __future__ import annotations

from typing import Any

from hubstore import open_store
from hubsync.core.connections import RedisClient
from hubsync.faults.inject import FaultInjector
from hubsync.faults.invariants import InvariantChecker, expect_all, secrets_check
from hubsync.faults.secrets import scan_files
from tests.helpers.chaos import SoakCluster

REDACTION_MARKERS = ("env", "github_token")
"""The redaction markers the appenders' planted texts must leave in the hub."""


def check_everything(
    cluster: SoakCluster, injector: FaultInjector, client: RedisClient
) -> dict[str, Any]:
    """Every invariant of the drained soak, Redis still running; their figures."""
    with open_store(cluster.hub_url, create_schema=False) as hub:
        checker = InvariantChecker(
            hub, client, cluster.runtimes, injector.record, cluster.relay_logs()
        )
        return expect_all(
            [
                *checker.standard(),
                checker.redaction_happened(REDACTION_MARKERS),
                checker.no_secret(cluster.planted.needles(), cluster.secret_places()),
            ]
        )


def check_no_secret_on_disk_of_redis(cluster: SoakCluster) -> int:
    """No planted secret in the AOF or redis.log (after redis stopped); bytes scanned."""
    scan = scan_files([cluster.redis.directory], cluster.planted.needles())
    secrets_check(scan).expect()
    return scan.file_bytes
