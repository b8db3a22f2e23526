"""The Redis connections of RQ and its jobs: RQ's own server, and the pipeline's Redis.

RQ does not support Redis Cluster, so its queue may live on a Redis server of
its own (``--rq-redis-url``) while the pipeline (streams, leases) is a cluster.
A job reaches the pipeline's Redis, never RQ's: the URL it was given, else the
pipeline's target of the ``hubsync effects-worker`` running it
(``PipelineWorker``), else the connection of the RQ job running it (RQ's Redis
is the pipeline's). A URL given to a job is reached with the worker's password
and ``--redis-cluster`` (``RedisTarget.with_url``).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

import redis
from rq import Queue, Worker
from rq.job import Job, get_current_job

from hubsync.core.connections import RedisClient, RedisTarget, connect
from hubsync.core.errors import ConfigError

_worker_targets: ContextVar[tuple[RedisTarget, RedisTarget] | None] = ContextVar(
    "_worker_targets", default=None
)
"""The pipeline's Redis and RQ's of the ``PipelineWorker`` performing the current job, if any."""


def rq_target(pipeline: RedisTarget, rq_url: str | None) -> RedisTarget:
    """The Redis RQ's queue lives on: ``rq_url`` (reached with ``pipeline``'s password),
    else the pipeline's Redis unless that is a cluster.

    A ``ConfigError`` (exit 2, one line) when there is none a single server serves.
    """
    if rq_url is None:
        if pipeline.uses_cluster():
            raise ConfigError(
                f"--rq-redis-url: the Redis of --redis-url ({pipeline.shown}) is a Redis "
                "Cluster, which RQ does not support; give RQ a Redis server of its own with "
                "--rq-redis-url (HUBSYNC_RQ_REDIS_URL)"
            )
        return pipeline
    own = pipeline.with_url(rq_url)
    if own.server_is_cluster():
        raise ConfigError(
            f"--rq-redis-url: {own.shown} is a Redis Cluster node; RQ needs one Redis "
            "server (not a cluster)"
        )
    return own


def rq_connection(target: RedisTarget) -> redis.Redis:
    """A client of RQ's Redis server (never a cluster client: RQ cannot use one)."""
    return connect(target, cluster=False)


class PipelineWorker(Worker):
    """An RQ worker on the Redis of ``rq`` whose jobs reach the pipeline's Redis at ``pipeline``.

    Both targets are handed to the jobs it performs (``job_connection``), for
    the time each job runs; nothing is left in the process.
    """

    def __init__(self, *args: Any, pipeline: RedisTarget, rq: RedisTarget, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pipeline = pipeline
        self.rq = rq

    def perform_job(self, job: Job, queue: Queue, *args: Any, **kwargs: Any) -> bool:
        token = _worker_targets.set((self.pipeline, self.rq))
        try:
            return super().perform_job(job, queue, *args, **kwargs)
        finally:
            _worker_targets.reset(token)


def job_connection(redis_url: str | None, job_name: str) -> RedisClient:
    """A client of the pipeline's Redis for an RQ job: ``redis_url`` if given, else the
    worker's pipeline Redis (``PipelineWorker``), else the RQ job's own connection.

    Called outside a worker without a URL it is a ``ConfigError``.
    """
    targets = _worker_targets.get()
    if redis_url:
        return connect(
            RedisTarget(redis_url) if targets is None else targets[0].with_url(redis_url)
        )
    if targets is not None and targets[0] != targets[1]:
        return connect(targets[0])  # RQ's queue lives elsewhere
    job = get_current_job()
    if job is None:
        raise ConfigError(f"{job_name} needs redis_url when called outside an RQ job")
    connection: redis.Redis = job.connection
    return connection
