"""The demo's shared-branch push: a holder stalled past its lease is refused by the remote."""

from __future__ import annotations

from pathlib import Path

from hubsync.core.connections import RedisTarget
from hubsync.demo.shared_push import shared_branch_push


def test_the_stalled_holder_is_refused_by_the_remote_and_main_holds_the_takers_commit(
    redis_url: str, tmp_path: Path
) -> None:
    shown = shared_branch_push(RedisTarget(redis_url), tmp_path)
    assert shown["token_b"] > shown["token_a"]
    # refused although main had not moved: only the fence could tell
    assert shown["main_unmoved_when_a_pushed"] is True
    assert shown["a_refused_by_remote"] is True and "refused the push" in shown["a_refusal"]
    assert shown["main_holds_only_b"] is True
    assert shown["fence_token"] == shown["token_b"]
