"""Effect jobs on RQ: real `rq worker` subprocesses race one webhook effect; RQ retries only
what is safe; the maintenance job runs from `rq cron`."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from rq import Retry, SimpleWorker
from rq.job import Job, JobStatus

from consumers.jobs.effect_jobs import effects_queue, enqueue_effect, run_effect
from consumers.jobs.maintenance import run_maintenance
from hubstore.sqlite.store import SqliteHubStore
from hubsync.core import keys
from hubsync.core.entries import PresenceBeat
from hubsync.core.errors import ConfigError, SchemaVersionError
from producers.effects import AttemptState, EffectKind, EffectsLedger, EffectSpec, EffectStatus
from tests.helpers.rq_support import burst_worker, environment_names, start_rq
from tests.helpers.support import wait_until
from tests.helpers.webhook_server import webhook_server


def _spec(url: str, attempt: str) -> EffectSpec:
    return EffectSpec("run-1", "notify", attempt, EffectKind.WEBHOOK, url, {"deploy": "v1"})


def test_two_rq_workers_race_one_webhook_effect_and_exactly_one_post_lands(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    ledger_path = tmp_path / "effects.db"
    EffectsLedger(ledger_path).close()
    queue = effects_queue(redis_client)
    log = tmp_path / "workers.log"
    with webhook_server() as hook:
        hook.release.clear()  # hold the first POST so the other worker meets a held lease
        jobs = [
            enqueue_effect(
                queue,
                _spec(hook.url, attempt),
                ledger_path=ledger_path,
                retry=Retry(max=5, interval=1),
            )
            for attempt in ["job-a", "job-b"]
        ]
        workers = [burst_worker(redis_url, log) for _ in range(2)]

        def one_is_scheduled_for_retry() -> bool:
            return any(job.get_status(refresh=True) == JobStatus.SCHEDULED for job in jobs)

        wait_until(one_is_scheduled_for_retry, timeout=60, what="the loser to be refused held")
        hook.release.set()
        for worker in workers:
            worker.wait(timeout=60)

        def both_finished() -> bool:
            if all(job.get_status(refresh=True) == JobStatus.FINISHED for job in jobs):
                return True
            burst_worker(redis_url, log).wait(timeout=60)  # fires the due retry
            return False

        wait_until(both_finished, timeout=60, interval=0.2, what="both jobs to finish")
        assert len(hook.posts) == 1, log.read_text()
    results = sorted(
        str(Job.fetch(job.id, connection=redis_client).return_value()["status"]) for job in jobs
    )  # type: ignore[index]
    assert results == ["already_committed", "committed"]
    assert hook.posts[0]["X-Hubsync-Fencing-Token"] == "1"
    ledger = EffectsLedger(ledger_path)
    [record] = ledger.list_run("run-1")
    assert record.status is EffectStatus.COMMITTED
    assert record.receipt is not None and record.receipt["status"] == 200
    ledger.close()


def test_an_rq_child_sees_only_the_environment_the_test_gives_it(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # what this process's shell exported must not configure a child behind the test's back
    monkeypatch.setenv("HUBSYNC_FROM_THE_PARENT", "must-not-reach-the-child")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    job = effects_queue(redis_client).enqueue(environment_names)
    log = tmp_path / "rq.log"
    worker = start_rq(
        ["worker", keys.EFFECTS_QUEUE, "--burst"], redis_url, log, {"HUBSYNC_GIVEN": "1"}
    )
    assert worker.wait(timeout=60) == 0, log.read_text()
    names = Job.fetch(job.id, connection=redis_client).return_value()
    assert isinstance(names, list) and "HUBSYNC_GIVEN" in names, log.read_text()
    assert "HUBSYNC_FROM_THE_PARENT" not in names
    assert "REDIS_URL" not in names


def _work(redis_client: redis.Redis) -> None:
    SimpleWorker([effects_queue(redis_client)], connection=redis_client).work(burst=True)


def _enqueue(redis_client: redis.Redis, url: str, ledger_path: Path) -> Job:
    """One webhook effect on the queue, allowed up to three RQ retries."""
    return enqueue_effect(
        effects_queue(redis_client), _spec(url, "a1"), ledger_path=ledger_path, retry=Retry(max=3)
    )


def _post_once_and_fail(redis_client: redis.Redis, status: int, ledger_path: Path) -> Job:
    """Run a webhook effect whose target answers ``status``; it must POST once and fail."""
    with webhook_server(status=status) as hook:
        job = _enqueue(redis_client, hook.url, ledger_path)
        _work(redis_client)
        assert len(hook.posts) == 1
    assert job.get_status(refresh=True) == JobStatus.FAILED
    return job


def test_an_uncertain_outcome_parks_blocked_uncertain_and_rq_never_retries_it(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    ledger_path = tmp_path / "effects.db"
    _post_once_and_fail(redis_client, 500, ledger_path)
    ledger = EffectsLedger(ledger_path)
    [record] = ledger.list_run("run-1")
    assert record.status is EffectStatus.IN_FLIGHT
    assert record.attempt_state is AttemptState.BLOCKED_UNCERTAIN
    ledger.close()


def test_a_refused_target_fails_without_retry_and_leaves_no_row(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    ledger_path = tmp_path / "effects.db"
    _post_once_and_fail(redis_client, 422, ledger_path)
    ledger = EffectsLedger(ledger_path)
    assert ledger.list_run("run-1") == []
    ledger.close()


def test_nothing_executed_is_retried_and_then_commits(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    ledger_path = tmp_path / "effects.db"
    with webhook_server(status=503) as hook:
        job = _enqueue(redis_client, hook.url, ledger_path)
        hook.status = 503
        SimpleWorker([effects_queue(redis_client)], connection=redis_client).execute_job(
            job, effects_queue(redis_client)
        )
        assert job.get_status(refresh=True) == JobStatus.QUEUED  # requeued for retry
        hook.status = 200
        _work(redis_client)
        assert len(hook.posts) == 2
    assert job.get_status(refresh=True) == JobStatus.FINISHED


def test_run_effect_outside_rq_needs_a_redis_url(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="run_effect needs redis_url"):
        run_effect(
            {
                "run_id": "r",
                "step_id": "s",
                "attempt_id": "a",
                "kind": "webhook",
                "target": "http://127.0.0.1:1/x",
            },
            str(tmp_path / "e.db"),
        )


def test_maintenance_runs_from_rq_cron_and_an_rq_worker(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    ledger_path = tmp_path / "effects.db"
    ledger = EffectsLedger(ledger_path)
    key = ledger.claim(EffectSpec("run-1", "s", "a1", EffectKind.GIT_COMMIT, "abc"))
    assert isinstance(key, str)
    ledger.commit(key, "a1", {})
    ledger.close()
    stream = keys.events_stream("proj", "rt-old")
    redis_client.sadd(keys.PROJECTS, "proj")
    redis_client.xgroup_create(stream, keys.CONSUMER_GROUP, id="0", mkstream=True)
    redis_client.xgroup_createconsumer(stream, keys.CONSUMER_GROUP, "dead-consumer")
    hub_db = tmp_path / "hub.db"
    with SqliteHubStore(hub_db) as hub:
        hub.record_presence(
            [PresenceBeat("rt-old", "proj", "host", 1, "0", 0, "2020-01-01T00:00:00.000000Z")]
        )
        assert len(hub.presence("proj")) == 1
    env = {
        "HUBSYNC_HUB_DB": str(hub_db),
        "HUBSYNC_HUB_RETENTION": "0",
        "HUBSYNC_EFFECTS_LEDGER": str(ledger_path),
        "HUBSYNC_EFFECTS_RETENTION": "0",
        "HUBSYNC_DEAD_CONSUMER_IDLE": "0",
        "HUBSYNC_MAINTENANCE_INTERVAL": "3600",
    }
    log = tmp_path / "cron.log"
    cron = start_rq(["cron", "consumers.jobs.maintenance_cron"], redis_url, log, env)
    try:
        queue = effects_queue(redis_client)
        wait_until(lambda: queue.count >= 1, timeout=30, what="rq cron to enqueue maintenance")
    finally:
        # rq cron may swallow SIGTERM mid-enqueue and sleep on; its state is in Redis.
        cron.kill()
        cron.wait(timeout=30)
    burst_worker(redis_url, tmp_path / "worker.log").wait(timeout=60)
    assert EffectsLedger(ledger_path).list_run("run-1") == []
    with SqliteHubStore(hub_db) as hub:
        assert hub.presence("proj") == [], "presence older than the hub retention is purged"
    assert redis_client.xinfo_consumers(stream, keys.CONSUMER_GROUP) == []


def test_maintenance_purges_the_hub_store_its_url_names_and_never_creates_one(
    redis_url: str, tmp_path: Path
) -> None:
    hub_db = tmp_path / "hub.db"
    with SqliteHubStore(hub_db) as hub:
        hub.record_presence(
            [PresenceBeat("rt-old", "proj", "host", 1, "0", 0, "2020-01-01T00:00:00.000000Z")]
        )
    report = run_maintenance(redis_url=redis_url, hub_url=f"sqlite:///{hub_db}", hub_retention=0)
    assert report["purged_presence"] == 1
    with SqliteHubStore(hub_db) as hub:
        assert hub.presence("proj") == []
    missing = tmp_path / "typo.db"
    with pytest.raises(SchemaVersionError, match="hubsync consume"):
        run_maintenance(redis_url=redis_url, hub_db=str(missing))
    assert not missing.exists(), "maintenance never creates a hub database"
    with pytest.raises(ConfigError, match="not both"):
        run_maintenance(redis_url=redis_url, hub_url=f"sqlite:///{hub_db}", hub_db=str(hub_db))
