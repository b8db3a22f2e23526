"""Effect jobs on RQ: claim -> execute (heartbeating) -> commit, on queue ``hubsync-effects``.

Run workers with rq's own CLI (``--with-scheduler`` so delayed retries fire)::

    rq worker hubsync-effects --with-scheduler --url redis://127.0.0.1:6379/0

RQ retries only what is safe: a job raises ``RetryLaterError`` (RQ's ``Retry``
policy applies) only when nothing executed. Every other failure sets the job's
remaining retries to zero first, so a ``blocked_uncertain`` attempt, a refused
target or an unknown outcome is never re-run; it lands in RQ's failed registry
and the ledger says why.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

import redis
from rq import Queue, Retry
from rq.job import Job, get_current_job

from consumers.jobs.effect_executors import ExecutionContext, resolve_executor
from consumers.jobs.job_connection import job_connection
from hubstore.leases import LeaseClient
from hubsync.core.keys import EFFECTS_QUEUE
from producers.effects.errors import (
    EffectFailedError,
    EffectRefusedError,
    NothingExecutedError,
    RetryLaterError,
)
from producers.effects.kinds import EffectKind
from producers.effects.ledger import EffectsLedger
from producers.effects.records import EffectClaim, EffectRefusalCode, EffectRefused, EffectSpec
from producers.effects.shared import DEFAULT_LEASE_TTL_MS, SharedEffects

log = logging.getLogger(__name__)

DEFAULT_RETRY = Retry(max=5, interval=[1, 2, 5, 10, 30])
"""Retries of safe-to-retry refusals (a lease held elsewhere frees within its TTL)."""


def effects_queue(connection: redis.Redis) -> Queue:
    """The ``hubsync-effects`` queue on ``connection``."""
    return Queue(EFFECTS_QUEUE, connection=connection)


def enqueue_effect(
    queue: Queue,
    spec: EffectSpec,
    *,
    ledger_path: Path | str,
    executor: str = "webhook",
    lease_ttl_ms: int = DEFAULT_LEASE_TTL_MS,
    retry: Retry | None = DEFAULT_RETRY,
    job_timeout: int = 600,
) -> Job:
    """Enqueue one effect job; ``spec.attempt_id`` names this attempt in the ledger."""
    fields = asdict(spec) | {"kind": spec.kind.value}
    return queue.enqueue(
        run_effect,
        fields,
        str(ledger_path),
        executor=executor,
        lease_ttl_ms=lease_ttl_ms,
        retry=retry,
        job_timeout=job_timeout,
        description=f"effect {spec.kind.value} run={spec.run_id} step={spec.step_id}",
    )


def run_effect(
    spec: dict[str, Any],
    ledger_path: str,
    *,
    executor: str = "webhook",
    lease_ttl_ms: int = DEFAULT_LEASE_TTL_MS,
    redis_url: str | None = None,
) -> dict[str, Any]:
    """The job: claim, execute with a heartbeat, commit. Returns what happened."""
    effect = EffectSpec(
        run_id=spec["run_id"],
        step_id=spec["step_id"],
        attempt_id=spec["attempt_id"],
        kind=EffectKind(spec["kind"]),
        target=spec["target"],
        payload=dict(spec.get("payload") or {}),
    )
    connection = job_connection(redis_url, "run_effect")
    ledger = EffectsLedger(Path(ledger_path))
    try:
        effects = SharedEffects(ledger, LeaseClient(connection), lease_ttl_ms=lease_ttl_ms)
        claim = effects.claim(effect)
        if isinstance(claim, EffectRefused):
            return _refused_at_claim(claim)
        return _execute_and_commit(effects, claim, executor)
    finally:
        ledger.close()


def _refused_at_claim(refused: EffectRefused) -> dict[str, Any]:
    if refused.code is EffectRefusalCode.ALREADY_COMMITTED:
        existing = refused.existing
        return {"status": "already_committed", "effect_key": existing and existing.effect_key}
    if refused.retryable:
        raise RetryLaterError(refused.message)
    _no_retry()
    raise EffectRefusedError(refused.code.value, refused.message)


def _execute_and_commit(
    effects: SharedEffects, claim: EffectClaim, executor: str
) -> dict[str, Any]:
    keeper = effects.keep_alive(claim)
    if keeper is not None:
        keeper.start()
    try:
        receipt = resolve_executor(executor).execute(ExecutionContext(claim))
        failure: Exception | None = None
    except Exception as exc:
        failure = exc
    finally:
        # Stop heartbeating before anything else touches the lease; commit
        # re-presents the token and releases it.
        if keeper is not None:
            keeper.close(release=False)
    if isinstance(failure, NothingExecutedError):
        effects.abandon(claim, str(failure))
        raise RetryLaterError(str(failure)) from None
    if isinstance(failure, EffectFailedError):
        effects.abandon(claim, str(failure), failed=True)
        _no_retry()
        raise failure
    if failure is not None:
        # Unknown outcome (OutcomeUncertainError or anything unexpected): park it.
        refused = effects.park(claim, f"{type(failure).__name__}: {failure}")
        _no_retry()
        raise EffectRefusedError(refused.code.value, refused.message) from failure
    committed = effects.commit(claim, receipt, lost=keeper.lost if keeper is not None else None)
    if isinstance(committed, EffectRefused):
        _no_retry()
        raise EffectRefusedError(committed.code.value, committed.message)
    log.info("effect %s committed (token %s)", claim.effect_key, committed.record.fencing_token)
    return {
        "status": "committed",
        "effect_key": claim.effect_key,
        "token": committed.record.fencing_token,
        "receipt": receipt,
    }


def _no_retry() -> None:
    """Make RQ fail this job without retrying it (its outcome is not safe to repeat)."""
    job = get_current_job()
    if job is not None:
        job.retries_left = 0
