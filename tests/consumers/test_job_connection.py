"""RQ jobs reach the pipeline's Redis their worker was given, with its password: nothing is
set for the process, the worker hands its targets to each job it performs."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from rq import Queue

from consumers.jobs.job_connection import PipelineWorker, job_connection
from hubsync.core.connections import RedisTarget
from hubsync.core.errors import ConfigError
from hubsync.demo.embedded_redis import RedisServerProcess

PASSWORD = "j0b-Pipeline-Pass-3a"


def whoami(redis_url: str | None = None) -> list[object]:
    """The job: who it is, and on which server, on the pipeline's Redis it was handed."""
    client = job_connection(redis_url, "whoami")
    try:
        port = client.connection_pool.connection_kwargs.get("port")  # type: ignore[union-attr]
        return [client.acl_whoami(), port]
    finally:
        client.close()


@pytest.fixture
def locked_pipeline(private_redis: RedisServerProcess, tmp_path: Path) -> RedisTarget:
    admin = redis.Redis.from_url(private_redis.url)
    admin.config_set("requirepass", PASSWORD)
    admin.close()
    password_file = tmp_path / "pw"
    password_file.write_text(PASSWORD)
    return RedisTarget.of(private_redis.url, password_file)


def test_a_job_reaches_the_pipeline_of_its_worker_with_the_workers_password(
    redis_url: str, locked_pipeline: RedisTarget
) -> None:
    rq = RedisTarget(redis_url)  # RQ's queue lives on another, open server
    connection = redis.Redis.from_url(redis_url)
    queue = Queue("hubsync-test-jobs", connection=connection)
    given = queue.enqueue(whoami)
    with_url = queue.enqueue(whoami, locked_pipeline.url)  # a URL without its password
    worker = PipelineWorker([queue], connection=connection, pipeline=locked_pipeline, rq=rq)
    worker.work(burst=True)
    pipeline_port = int(locked_pipeline.url.rsplit(":", 1)[1].split("/")[0])
    for job in (given, with_url):
        job.refresh()
        assert job.return_value() == ["default", pipeline_port], job.latest_result()
    connection.close()


def test_outside_a_worker_a_job_needs_a_url(redis_url: str) -> None:
    with pytest.raises(ConfigError, match="needs redis_url"):
        job_connection(None, "whoami")
    client = job_connection(redis_url, "whoami")
    assert client.ping() is True
    client.close()
