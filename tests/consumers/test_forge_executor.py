"""The forge executor against a local forge on 127.0.0.1: it looks before it creates, maps
429/503 to "nothing executed", and settles a create that timed out by looking again, so
exactly one pull request or issue exists."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from consumers.jobs.effect_executors import ExecutionContext, resolve_executor
from consumers.jobs.effect_jobs import run_effect
from consumers.jobs.forge import ForgeExecutor, ForgeSettings, issue_marker
from hubsync.core.errors import ConfigError
from producers.effects import (
    EffectClaim,
    EffectKind,
    EffectRefused,
    EffectsLedger,
    EffectSpec,
    EffectStatus,
    Verdict,
    effect_key,
    lease_resource_for,
    resolve_effect,
)
from producers.effects.errors import (
    EffectFailedError,
    EffectRefusedError,
    NothingExecutedError,
    OutcomeUncertainError,
    RetryLaterError,
)
from producers.effects.history import EffectEvent
from tests.helpers.forge_server import TOKEN, LocalForge, forge_server
from tests.helpers.lease_support import expire_lease

PR_TARGET = "acme/shop:main...hubsync/run-r1"
PR = {"title": "Run r1: fix the build", "body": "What the run changed."}
ISSUE = {"title": "Flaky test in run r1", "body": "Seen twice.", "labels": ["ci"]}


def context(
    kind: EffectKind, target: str, payload: dict[str, Any], attempt: str = "a1"
) -> ExecutionContext:
    spec = EffectSpec("r1", "open", attempt, kind, target, payload)
    return ExecutionContext(EffectClaim(effect_key("r1", "open", kind, target), spec, None))


@dataclass
class ForgeJobs:
    """Effect jobs run with the ``forge`` executor against a local forge, on one ledger."""

    forge: LocalForge
    ledger_path: Path
    redis_url: str

    def run(self, fields: dict[str, Any]) -> dict[str, Any]:
        """``run_effect`` with the ``forge`` executor, as an RQ worker runs the job."""
        return run_effect(fields, str(self.ledger_path), executor="forge", redis_url=self.redis_url)

    @contextmanager
    def ledger(self) -> Iterator[EffectsLedger]:
        """The jobs' ledger, opened for the test to read or resolve (closed after)."""
        ledger = EffectsLedger(self.ledger_path)
        try:
            yield ledger
        finally:
            ledger.close()


@pytest.fixture
def jobs(redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ForgeJobs]:
    """A local forge that the ``forge`` executor an effect job resolves talks to."""
    with forge_server() as forge:
        monkeypatch.setenv("HUBSYNC_FORGE_API_URL", forge.url)
        monkeypatch.setenv("HUBSYNC_FORGE_TOKEN", TOKEN)
        yield ForgeJobs(forge, tmp_path / "effects.db", redis_url)


def job(kind: EffectKind, target: str, payload: dict[str, Any], step: str = "open",
        attempt: str = "a1") -> dict[str, Any]:  # fmt: skip
    """An effect job's spec fields, as ``enqueue_effect`` hands them to ``run_effect``."""
    return {"run_id": "r1", "step_id": step, "kind": kind.value, "target": target,
            "payload": payload, "attempt_id": attempt}  # fmt: skip


def executor(forge: LocalForge, timeout: float = 5.0) -> ForgeExecutor:
    return ForgeExecutor(forge.url, TOKEN, timeout=timeout)


def test_a_pull_request_is_created_once_and_found_the_second_time() -> None:
    with forge_server() as forge:
        first = executor(forge).execute(context(EffectKind.PR_CREATE, PR_TARGET, PR))
        again = executor(forge).execute(context(EffectKind.PR_CREATE, PR_TARGET, PR, "a2"))
    assert first["outcome"] == "created" and again["outcome"] == "found"
    assert first["number"] == again["number"] and first["url"].endswith("/acme/shop/pull/1")
    assert len(forge.pulls) == 1 and len(forge.creates()) == 1
    listing, create = forge.requests[0], forge.requests[1]
    assert (listing.method, listing.path) == ("GET", "/repos/acme/shop/pulls")
    assert listing.query["head"] == "acme:hubsync/run-r1" and listing.query["base"] == "main"
    assert listing.query["state"] == "open"
    assert create.body == {**PR, "head": "hubsync/run-r1", "base": "main"}
    assert {r.authorization for r in forge.requests} == {f"Bearer {TOKEN}"}


def test_an_issue_carries_the_effect_key_and_is_found_by_it() -> None:
    ctx = context(EffectKind.TRACKER_ISSUE, "acme/shop", ISSUE)
    with forge_server() as forge:
        forge.issues.append({"number": 7, "title": "other", "body": "unrelated",
                             "html_url": "x", "url": "y"})  # fmt: skip
        first = executor(forge).execute(ctx)
        again = executor(forge).execute(context(EffectKind.TRACKER_ISSUE, "acme/shop", ISSUE, "a2"))
        other = executor(forge).execute(context(EffectKind.TRACKER_ISSUE, "acme/shop#2", ISSUE))
    assert first["outcome"] == "created" and again == first | {"outcome": "found"}
    assert other["number"] != first["number"]
    body = forge.creates()[0].body
    assert body is not None and body["labels"] == ["ci"]
    assert body["body"] == f"Seen twice.\n\n{issue_marker(ctx.claim.effect_key)}"
    assert len(forge.issues) == 3 and len(forge.creates()) == 2


@pytest.mark.parametrize(
    ("kind", "target", "payload"),
    [(EffectKind.PR_CREATE, PR_TARGET, PR), (EffectKind.TRACKER_ISSUE, "acme/shop", ISSUE)],
)
def test_a_create_that_times_out_after_landing_is_settled_by_looking(
    kind: EffectKind, target: str, payload: dict[str, Any]
) -> None:
    with forge_server() as forge:
        forge.hold_creates = 1  # created, then no answer before the client's timeout
        receipt = executor(forge, timeout=0.5).execute(context(kind, target, payload))
        retried = executor(forge).execute(context(kind, target, payload, "a2"))
    assert receipt["outcome"] == "found after an unknown outcome"
    assert retried["outcome"] == "found" and retried["number"] == receipt["number"]
    assert len(forge.pulls) + len(forge.issues) == 1 and len(forge.creates()) == 1
    assert [r.method for r in forge.requests] == ["GET", "POST", "GET", "GET"]


@pytest.mark.parametrize("status", [429, 503])
def test_a_forge_that_did_not_process_the_create_means_nothing_executed(status: int) -> None:
    with forge_server() as forge:
        forge.refuse_creates = [status]
        with pytest.raises(NothingExecutedError, match=str(status)):
            executor(forge).execute(context(EffectKind.PR_CREATE, PR_TARGET, PR))
        receipt = executor(forge).execute(context(EffectKind.PR_CREATE, PR_TARGET, PR, "a2"))
    assert receipt["outcome"] == "created" and len(forge.pulls) == 1


def test_a_5xx_create_with_nothing_found_afterwards_is_uncertain() -> None:
    with forge_server() as forge:
        forge.refuse_creates = [500]
        with pytest.raises(OutcomeUncertainError, match="may still create it"):
            executor(forge).execute(context(EffectKind.TRACKER_ISSUE, "acme/shop", ISSUE))
    assert forge.issues == []


def test_a_pull_request_refused_as_a_duplicate_is_found_by_looking_again() -> None:
    with forge_server() as forge:
        executor(forge).execute(context(EffectKind.PR_CREATE, PR_TARGET, PR))
        forge.blind_lists = 1  # the first look misses it; GitHub then refuses the create (422)
        receipt = executor(forge).execute(context(EffectKind.PR_CREATE, PR_TARGET, PR, "a2"))
    assert receipt["outcome"] == "found after an unknown outcome" and receipt["number"] == 1
    assert len(forge.pulls) == 1 and len(forge.creates()) == 2


def test_a_create_refused_for_good_with_nothing_found_fails() -> None:
    with forge_server() as forge:
        forge.refuse_creates = [403]
        with pytest.raises(EffectFailedError, match="refused with 403"):
            executor(forge).execute(context(EffectKind.TRACKER_ISSUE, "acme/shop", ISSUE))
    assert forge.issues == [] and [r.method for r in forge.requests] == ["GET", "POST", "GET"]


def test_a_refused_token_fails_for_good_and_never_shows_the_token() -> None:
    with forge_server() as forge:
        wrong = ForgeExecutor(forge.url, "not-the-token-at-all-42")
        with pytest.raises(NothingExecutedError) as looking:
            wrong.execute(context(EffectKind.PR_CREATE, PR_TARGET, PR))
    assert "401" in str(looking.value) and "not-the-token" not in str(looking.value)
    assert "not-the-token" not in repr(wrong) and forge.pulls == []


@pytest.mark.parametrize(
    ("kind", "target", "payload", "message"),
    [
        (EffectKind.PR_CREATE, "acme/shop", PR, "OWNER/REPO:BASE...HEAD"),
        (EffectKind.PR_CREATE, PR_TARGET, {"body": "no title"}, "'title'"),
        (EffectKind.TRACKER_ISSUE, "acme", ISSUE, "OWNER/REPO"),
        (EffectKind.TRACKER_ISSUE, "acme/shop", ISSUE | {"labels": "ci"}, "'labels'"),
        (EffectKind.WEBHOOK, "acme/shop", ISSUE, "pr-create and tracker-issue"),
    ],
)
def test_a_malformed_effect_fails_before_any_request(
    kind: EffectKind, target: str, payload: dict[str, Any], message: str
) -> None:
    with forge_server() as forge, pytest.raises(EffectFailedError, match=message):
        executor(forge).execute(context(kind, target, payload))
    assert forge.requests == []


def test_the_token_comes_from_a_file_or_the_environment_never_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    monkeypatch.setenv("HUBSYNC_FORGE_API_URL", "https://ghe.example.test/api/v3/")
    monkeypatch.setenv("HUBSYNC_FORGE_TOKEN_FILE", str(token_file))
    monkeypatch.delenv("HUBSYNC_FORGE_TOKEN", raising=False)
    built = resolve_executor("forge")
    assert isinstance(built, ForgeExecutor) and built.api_url == "https://ghe.example.test/api/v3"
    monkeypatch.setenv("HUBSYNC_FORGE_TOKEN", "also-a-token-here")
    with pytest.raises(ConfigError, match="one place"):
        ForgeExecutor.from_environment()
    monkeypatch.delenv("HUBSYNC_FORGE_TOKEN_FILE")
    monkeypatch.delenv("HUBSYNC_FORGE_TOKEN")
    with pytest.raises(ConfigError, match="HUBSYNC_FORGE_TOKEN: missing"):
        ForgeExecutor.from_environment(ForgeSettings())
    with pytest.raises(ConfigError, match="carries a user or password") as userinfo:
        ForgeExecutor("https://bot:s3cret-token@ghe.example.test/api/v3", TOKEN)
    assert "s3cret" not in str(userinfo.value)


def test_an_effect_job_commits_the_forges_receipt_and_drops_a_503_attempt(
    jobs: ForgeJobs, monkeypatch: pytest.MonkeyPatch
) -> None:
    fields = job(EffectKind.PR_CREATE, PR_TARGET, PR)
    jobs.forge.refuse_creates = [503]
    with pytest.raises(RetryLaterError):
        jobs.run(fields)
    jobs.forge.hold_creates = 1
    monkeypatch.setenv("HUBSYNC_FORGE_TIMEOUT", "0.5")
    done = jobs.run(fields | {"attempt_id": "a2"})
    assert done["status"] == "committed" and len(jobs.forge.pulls) == 1
    with jobs.ledger() as ledger:
        [record] = ledger.list_run("r1")
        assert record.status is EffectStatus.COMMITTED and record.receipt == done["receipt"]
        assert done["receipt"]["outcome"] == "found after an unknown outcome"
        events = [(h.event, h.attempt_id) for h in ledger.history(record.effect_key)]
        assert events == [
            (EffectEvent.CLAIMED, "a1"),
            (EffectEvent.DROPPED, "a1"),
            (EffectEvent.CLAIMED, "a2"),
            (EffectEvent.COMMITTED, "a2"),
        ]
        assert TOKEN not in str(ledger.history(record.effect_key)) + str(record)


def test_a_parked_forge_effect_runs_again_once_an_operator_says_it_did_not_execute(
    jobs: ForgeJobs, redis_client: redis.Redis
) -> None:
    fields = job(EffectKind.TRACKER_ISSUE, "acme/shop", ISSUE, step="file")
    jobs.forge.refuse_creates = [500]
    with pytest.raises(EffectRefusedError, match="blocked_uncertain"):
        jobs.run(fields)
    # the parked attempt's lease runs out at its deadline; until then nothing claims it
    with pytest.raises(RetryLaterError, match="effect_lease_held"):
        jobs.run(fields)
    expire_lease(redis_client, lease_resource_for(EffectKind.TRACKER_ISSUE, "acme/shop"))
    with pytest.raises(EffectRefusedError, match="effect_blocked_uncertain"):
        jobs.run(fields)
    with jobs.ledger() as ledger:
        key = effect_key("r1", "file", EffectKind.TRACKER_ISSUE, "acme/shop")
        verdict = resolve_effect(ledger, key, Verdict.NOT_EXECUTED, note="none on the forge",
                                 actor="ops")  # fmt: skip
        assert not isinstance(verdict, EffectRefused)
    done = jobs.run(fields)
    assert done["status"] == "committed" and done["receipt"]["outcome"] == "created"
    assert len(jobs.forge.issues) == 1 and len(jobs.forge.creates()) == 2


def test_an_effect_job_refused_for_good_records_the_failure_in_the_history(
    jobs: ForgeJobs,
) -> None:
    jobs.forge.refuse_creates = [403]
    with pytest.raises(EffectFailedError, match="403"):
        jobs.run(job(EffectKind.PR_CREATE, PR_TARGET, PR))
    with jobs.ledger() as ledger:
        key = effect_key("r1", "open", EffectKind.PR_CREATE, PR_TARGET)
        assert ledger.get(key) is None
        history = ledger.history(key)
        assert [h.event for h in history] == [EffectEvent.CLAIMED, EffectEvent.FAILED]
        assert "refused with 403" in str(history[1].note)
