"""The Redis connection of an RQ job: the URL it was given, or the worker's own."""

from __future__ import annotations

import redis
from rq.job import get_current_job

from hubsync.connections import connect
from hubsync.errors import ConfigError


def job_connection(redis_url: str | None, job_name: str) -> redis.Redis:
    """A client of ``redis_url``; without one, the connection of the RQ job running this code.

    A job enqueued without a URL uses the worker's connection, so it reaches the
    Redis the worker was started on; called outside a worker it needs the URL.
    """
    if redis_url:
        return connect(redis_url)
    job = get_current_job()
    if job is None:
        raise ConfigError(f"{job_name} needs redis_url when called outside an RQ job")
    connection: redis.Redis = job.connection
    return connection
