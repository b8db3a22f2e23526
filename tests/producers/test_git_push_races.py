"""Shared pushes between real runtime processes, on real git and a local bare remote.

Two runtimes race for one branch; a holder paused (SIGSTOP) past its lease is refused
by the remote itself; a push killed mid-way is settled by reading the remote on retry.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import redis

from hubstore.leases import LeaseClient, LeaseState
from hubsync.processes import Child, python_command
from producers.effects import EffectClaim, EffectKind, EffectsLedger, SharedEffects
from producers.effects.git.executors import GitPushExecutor
from producers.effects.git.push import FenceMark, fence_ref
from producers.effects.kinds import lease_resource_for, run_branch
from tests.helpers import git_support as repos
from tests.helpers.git_support import Runtime, git
from tests.helpers.lease_support import expire_lease
from tests.helpers.support import wait_until

MAIN = "refs/heads/main"
RESOURCE = lease_resource_for(EffectKind.GIT_PUSH, "main")


def pusher(mode: str, redis_url: str, runtime: Runtime, run_id: str, remote: str) -> Child:
    """A runtime process pushing run ``run_id`` of ``runtime`` to main (``git_pusher``)."""
    work = runtime.workspace.root.parent / f"work-{run_id}"
    work.mkdir(exist_ok=True)
    ledger = runtime.workspace.root.parent / "effects.sqlite"
    argv = python_command("tests.helpers.git_pusher", mode, redis_url, str(ledger), run_id,
                          remote, str(work))  # fmt: skip
    env = {
        "HUBSYNC_GIT_REPOSITORY": str(runtime.repository),
        "HUBSYNC_GIT_WORKSPACE": str(runtime.workspace.root),
    }
    return Child(f"pusher-{run_id}", argv, work / "pusher.log", env=env).start()


def result_of(child: Child) -> dict[str, Any]:
    assert child.wait(timeout=60) == 0, child.tail()
    work = Path(child.argv[-1])
    result: dict[str, Any] = json.loads((work / "result.json").read_text())
    (work / "result.json").unlink()
    return result


def fence_mark(runtime: Runtime, remote: str) -> FenceMark:
    git(runtime.repository, "fetch", "--quiet", remote, f"+{fence_ref(MAIN)}:refs/test/fence")
    return FenceMark.read(
        runtime.repository, git(runtime.repository, "rev-parse", "refs/test/fence")
    )


def test_two_runtimes_race_for_one_branch_and_exactly_one_push_lands(
    tmp_path: Path, redis_url: str
) -> None:
    remote = repos.make_remote(tmp_path)
    boxes = [repos.make_runtime(tmp_path, remote, name) for name in ("box-a", "box-b")]
    commits = {
        f"run-{b.name}": repos.start_run(b, f"run-{b.name}", f"from {b.name}") for b in boxes
    }
    children = [pusher("wait-run", redis_url, b, f"run-{b.name}", remote) for b in boxes]
    try:
        for child in children:
            (Path(child.argv[-1]) / "go").touch()
        results = {child.name.removeprefix("pusher-"): result_of(child) for child in children}
    finally:
        for child in children:
            child.kill()

    landed = [run for run, result in results.items() if result["status"] == "committed"]
    assert len(landed) == 1, results
    (winner,) = landed
    (loser,) = set(results) - {winner}
    # the other was refused, and said why: the lease was held, or main moved under it
    assert results[loser]["status"] in {"RetryLaterError", "EffectFailedError"}, results
    assert repos.remote_ref(remote, MAIN) == commits[winner]
    winner_box = next(b for b in boxes if f"run-{b.name}" == winner)
    assert fence_mark(winner_box, remote).token == results[winner]["token"]

    # its retry in the next lease term is refused for good (no fast-forward), and lost nothing
    loser_box = next(b for b in boxes if f"run-{b.name}" == loser)
    retry = result_of(pusher("run", redis_url, loser_box, loser, remote))
    assert retry["status"] == "EffectFailedError" and "not a fast-forward" in retry["message"]
    assert repos.remote_ref(remote, MAIN) == commits[winner]
    assert git(loser_box.repository, "rev-parse", run_branch(loser)) == commits[loser]


def test_a_holder_paused_past_its_lease_is_refused_by_the_remote(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    remote = repos.make_remote(tmp_path)
    stalled_box, new_box = (repos.make_runtime(tmp_path, remote, n) for n in ("box-a", "box-b"))
    repos.start_run(stalled_box, "run-a", "from the stalled holder")
    commit_b = repos.start_run(new_box, "run-b", "from the new holder")
    holder = pusher("stall", redis_url, stalled_box, "run-a", remote)
    work = Path(holder.argv[-1])
    try:
        wait_until((work / "fenced.json").exists, timeout=30, what="the holder to fence main")
        old_token = json.loads((work / "fenced.json").read_text())["token"]
        holder.pause()
        leases = LeaseClient(redis_client)
        wait_until(lambda: leases.show(RESOURCE).state is LeaseState.EXPIRED, timeout=10,
                   what="the paused holder's lease to expire on Redis's clock")  # fmt: skip

        ledger = EffectsLedger(tmp_path / "box-b" / "effects.sqlite")
        effects = SharedEffects(ledger, leases, holder="new-box")
        claim = effects.claim(
            repos.spec("run-b", "push", EffectKind.GIT_PUSH, "main", remote=remote)
        )
        assert isinstance(claim, EffectClaim) and claim.lease is not None
        assert claim.lease.token > old_token
        receipt = GitPushExecutor(new_box.workspace).execute(repos.Context(claim))
        assert effects.commit(claim, receipt).ok
        ledger.close()

        holder.resume()
        (work / "go").touch()
        result = result_of(holder)
    finally:
        holder.kill()

    assert result["checked_before_pause"] is True  # its lease check passed before the pause
    assert result["status"] == "FenceSupersededError", result
    assert "refused the push" in result["message"]
    assert repos.remote_ref(remote, MAIN) == commit_b
    assert git(new_box.repository, "rev-list", "--count", f"{commit_b}^..{commit_b}") == "1"
    git(new_box.repository, "fetch", "--quiet", remote, "main")
    assert (
        git(new_box.repository, "log", "--format=%s", "FETCH_HEAD") == "from the new holder\nfirst"
    )
    mark = fence_mark(new_box, remote)
    assert (mark.token, mark.holder, mark.state) == (claim.lease.token, "new-box",
                                                     f"pushed {commit_b}")  # fmt: skip


@pytest.mark.parametrize(
    ("hook", "landed_before_the_kill"), [("pre-receive", False), ("post-receive", True)]
)
def test_a_push_killed_mid_way_is_settled_by_reading_the_remote_on_retry(
    tmp_path: Path,
    redis_url: str,
    redis_client: redis.Redis,
    hook: str,
    landed_before_the_kill: bool,
) -> None:
    remote = repos.make_remote(tmp_path)
    box = repos.make_runtime(tmp_path, remote, "box-a")
    commit = repos.start_run(box, "run-a", "pushed once")
    before = repos.remote_ref(remote, MAIN)
    flags = tmp_path / "flags"
    repos.hold_pushes(remote, hook, MAIN, flags)
    holder = pusher("run", redis_url, box, "run-a", remote)
    try:
        wait_until((flags / "held").exists, timeout=30, what="the push to reach the remote")
        os.killpg(holder.pid, signal.SIGKILL)  # the runtime, its git push and the remote end
    finally:
        holder.kill()
        (flags / "release").touch()
    assert repos.remote_ref(remote, MAIN) == (commit if landed_before_the_kill else before)

    # the dead attempt's lease runs out and its ledger row goes stale: time passes
    expire_lease(redis_client, RESOURCE)
    ledger_path = tmp_path / "box-a" / "effects.sqlite"
    with sqlite3.connect(ledger_path) as conn:
        conn.execute(
            "UPDATE external_effects SET last_heartbeat_at = '2000-01-01T00:00:00.000000Z'"
        )
    conn.close()

    retry = result_of(pusher("run", redis_url, box, "run-a", remote))
    assert retry["status"] == "committed", retry
    assert retry["receipt"]["commit"] == commit == repos.remote_ref(remote, MAIN)
    assert retry["receipt"].get("already", False) is landed_before_the_kill
    ledger = EffectsLedger(ledger_path)
    (record,) = ledger.list_run("run-a")
    ledger.close()
    assert record.status.value == "committed" and record.fencing_token == retry["token"]
