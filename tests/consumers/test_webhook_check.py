"""``webhook-checked``: an unknown webhook outcome is settled by asking the target."""

from __future__ import annotations

import pytest

from consumers.jobs.effect_executors import ExecutionContext, WebhookExecutor, resolve_executor
from producers.effects import EffectClaim, EffectKind, EffectSpec
from producers.effects.errors import NothingExecutedError, OutcomeUncertainError
from tests.helpers.webhook_server import WebhookRecorder, webhook_server


def context(url: str) -> ExecutionContext:
    spec = EffectSpec("run-1", "notify", "a1", EffectKind.WEBHOOK, url, {"deploy": "v1"})
    return ExecutionContext(EffectClaim("eff_checked", spec, None))


def held_past_the_timeout(hook: WebhookRecorder) -> None:
    hook.release.clear()  # the POST is processed, its answer never comes in time


def test_a_post_processed_but_unanswered_is_settled_committed_by_the_check() -> None:
    with webhook_server() as hook:
        held_past_the_timeout(hook)
        receipt = WebhookExecutor(timeout=0.5, check=True).execute(context(hook.url))
    assert receipt["status"] == 200 and receipt["settled"] is True
    assert len(hook.posts) == 1 and hook.checks == ["eff_checked"]


def test_a_post_the_target_never_processed_is_settled_not_executed() -> None:
    with (
        webhook_server(status=502) as hook,
        pytest.raises(NothingExecutedError, match="no record of eff_checked"),
    ):
        resolve_executor("webhook-checked").execute(context(hook.url))
    assert len(hook.posts) == 1 and hook.checks == ["eff_checked"]


def test_without_the_check_the_outcome_stays_uncertain_and_nothing_is_asked() -> None:
    with webhook_server() as hook:
        held_past_the_timeout(hook)
        with pytest.raises(OutcomeUncertainError, match="failed mid-request"):
            WebhookExecutor(timeout=0.5).execute(context(hook.url))
    assert hook.checks == []
