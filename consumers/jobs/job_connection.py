"""The Redis connections of RQ and its jobs: RQ's own server, and the pipeline's Redis.

RQ does not support Redis Cluster, so its queue may live on a Redis server of
its own (``--rq-redis-url``) while the pipeline (streams, leases) is a cluster.
A job reaches the pipeline's Redis, never RQ's: the URL it was given, else the
one ``hubsync effects-worker`` set for its process (``use_pipeline_redis``),
else the connection of the RQ job running it (RQ's Redis is the pipeline's).
"""

from __future__ import annotations

import redis
from rq.job import get_current_job

from hubsync.core.connections import RedisClient, connect, server_is_cluster
from hubsync.core.errors import ConfigError
from hubsync.core.settings import safe_url

_pipeline_url: str | None = None
"""The pipeline's Redis of this worker process, when RQ's queue lives elsewhere."""


def rq_redis_url(redis_url: str, rq_url: str | None, *, redis_is_cluster: bool) -> str:
    """The URL RQ's queue lives on: ``rq_url``, else ``redis_url`` unless that is a cluster.

    A ``ConfigError`` (exit 2, one line) when there is none a single server serves.
    """
    if rq_url is None:
        if redis_is_cluster:
            raise ConfigError(
                f"--rq-redis-url: the Redis of --redis-url ({safe_url(redis_url)}) is a Redis "
                "Cluster, which RQ does not support; give RQ a Redis server of its own with "
                "--rq-redis-url (HUBSYNC_RQ_REDIS_URL)"
            )
        return redis_url
    if server_is_cluster(rq_url):
        raise ConfigError(
            f"--rq-redis-url: {safe_url(rq_url)} is a Redis Cluster node; RQ needs one Redis "
            "server (not a cluster)"
        )
    return rq_url


def use_pipeline_redis(url: str | None) -> None:
    """Make ``url`` the pipeline's Redis of this worker's jobs (None: RQ's own connection)."""
    global _pipeline_url
    _pipeline_url = url


def rq_connection(url: str) -> redis.Redis:
    """A client of RQ's Redis server (never a cluster client: RQ cannot use one)."""
    return connect(url, cluster=False)


def job_connection(redis_url: str | None, job_name: str) -> RedisClient:
    """A client of the pipeline's Redis for an RQ job: ``redis_url`` if given, else the
    worker's pipeline Redis (``use_pipeline_redis``), else the RQ job's own connection.

    Called outside a worker without a URL it is a ``ConfigError``.
    """
    url = redis_url or _pipeline_url
    if url:
        return connect(url)
    job = get_current_job()
    if job is None:
        raise ConfigError(f"{job_name} needs redis_url when called outside an RQ job")
    connection: redis.Redis = job.connection
    return connection
