"""The git executors on real git and local bare remotes (``file://``), in one process.

The multi-process races (two runtimes, a paused holder, a push killed mid-way)
are in ``tests/e2e/test_git_push_races.py``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hubstore.leases import LeaseClient
from hubsync.processes import child_environment
from producers.effects import EffectClaim, EffectKind, EffectsLedger, SharedEffects
from producers.effects.errors import EffectFailedError, NothingExecutedError, OutcomeUncertainError
from producers.effects.git.command import check_remote, redact_remote, run_git
from producers.effects.git.executors import (
    GitBranchExecutor,
    GitCleanupExecutor,
    GitCommitExecutor,
    GitPushExecutor,
)
from producers.effects.git.locks import LockHolder, WorktreeBusyError
from producers.effects.git.push import FenceMark, FenceSupersededError, claim_fence, fence_ref
from producers.effects.git.remote import settle
from producers.effects.git.worktrees import Workspace
from producers.effects.kinds import lease_resource_for, requires_lease, run_branch
from tests.helpers.clock import FakeClock
from tests.helpers.git_support import (
    Context,
    Runtime,
    git,
    hold_pushes,
    lease_free,
    make_remote,
    make_runtime,
    remote_ref,
    spec,
    start_run,
)
from tests.helpers.lease_support import expire_lease
from tests.helpers.support import REPO_ROOT

MAIN = "refs/heads/main"


@pytest.fixture
def remote(tmp_path: Path) -> str:
    return make_remote(tmp_path)


@pytest.fixture
def box(tmp_path: Path, remote: str) -> Runtime:
    return make_runtime(tmp_path, remote, "box-a")


# -- names and worktrees ----------------------------------------------------------------


def test_run_branch_names_are_deterministic_readable_and_valid_refs(tmp_path: Path) -> None:
    assert run_branch("run-42") == "hubsync/run-run-42"
    odd = run_branch("team/deploy:7@main")
    assert odd == run_branch("team/deploy:7@main")
    assert odd.startswith("hubsync/run-team-deploy-7-main-") and len(odd.rpartition("-")[2]) == 8
    # ids that read the same once made safe still get branches of their own
    assert run_branch("a:b") != run_branch("a-b") == "hubsync/run-a-b"
    for name in (odd, run_branch("x..y"), run_branch("end.lock"), run_branch("v1.2")):
        assert run_git(["check-ref-format", f"refs/heads/{name}"], tmp_path).returncode == 0
    # the executors push a run's own (made-safe) branch without a lease
    assert not requires_lease(EffectKind.GIT_PUSH, odd, "team/deploy:7@main")


def test_a_shared_branch_has_one_lease_however_its_target_is_spelled() -> None:
    main = lease_resource_for(EffectKind.GIT_PUSH, "main")
    assert lease_resource_for(EffectKind.GIT_PUSH, "refs/heads/main") == main
    assert lease_resource_for(EffectKind.GIT_PUSH, "refs/heads/dev") != main


def test_git_branch_adds_the_runs_worktree_once(box: Runtime) -> None:
    effect = spec("r1", "branch", EffectKind.GIT_BRANCH, run_branch("r1"), start="main")
    first = GitBranchExecutor(box.workspace).execute(lease_free(effect))
    again = GitBranchExecutor(box.workspace).execute(lease_free(effect))
    assert (first["created"], again["created"]) == (True, False)
    assert first["worktree"] == "worktrees/run-r1" and first["head"] == again["head"]
    worktree = box.workspace.worktree("r1")
    assert git(worktree, "branch", "--show-current") == "hubsync/run-r1"
    assert "locked" not in git(box.repository, "worktree", "list", "--porcelain")


def test_git_commit_commits_once_and_a_retry_finds_it(box: Runtime) -> None:
    commit = start_run(box, "r1", "one")
    retry = GitCommitExecutor(box.workspace).execute(
        lease_free(spec("r1", "commit", EffectKind.GIT_COMMIT, run_branch("r1"), message="one"))
    )
    assert retry == {"branch": "hubsync/run-r1", "commit": commit, "already": True}
    assert git(box.workspace.worktree("r1"), "rev-list", "--count", "main..HEAD") == "1"


def test_an_effect_on_another_runs_branch_is_refused(box: Runtime) -> None:
    start_run(box, "r1", "one")
    with pytest.raises(EffectFailedError, match="targets its run's branch"):
        GitCommitExecutor(box.workspace).execute(
            lease_free(spec("r2", "commit", EffectKind.GIT_COMMIT, run_branch("r1"), message="x"))
        )


# -- worktree locks -------------------------------------------------------------------------


def test_two_processes_never_hold_one_worktree_and_a_dead_holders_lock_is_recovered(
    box: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    start_run(box, "r1", "one")
    code = (
        "import sys\nfrom pathlib import Path\n"
        "from producers.effects.git.worktrees import Workspace\n"
        "lock = Workspace(Path(sys.argv[1]), Path(sys.argv[2])).lock('r1')\n"
        "lock.acquire()\nprint('held', flush=True)\nsys.stdin.read()\n"  # held until killed
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(box.repository), str(box.workspace.root)],
        cwd=REPO_ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=child_environment(),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(WorktreeBusyError, match="in use by another process"):
            box.workspace.lock("r1").acquire()
        holder.kill()  # it dies holding both locks: the kernel drops the file lock
    finally:
        holder.kill()
        holder.wait()
        for pipe in (holder.stdin, holder.stdout):
            if pipe is not None:
                pipe.close()
    reason = box.workspace.lock("r1").current_reason()
    assert reason is not None and f":{holder.pid} since " in reason
    with caplog.at_level(logging.WARNING), box.workspace.lock("r1") as lock:
        assert isinstance(lock.recovered, LockHolder) and lock.recovered.pid == holder.pid
        assert f":{os.getpid()} since " in str(lock.current_reason())
    assert "recovered a stale lock" in caplog.text and "pid is gone" in caplog.text
    assert box.workspace.lock("r1").current_reason() is None


def test_a_lock_of_another_host_is_recovered_only_past_its_age(box: Runtime) -> None:
    start_run(box, "r1", "one")
    clock = FakeClock(1_000_000.0)
    workspace = Workspace(box.repository, box.workspace.root, lock_max_age=600, clock=clock)
    other = LockHolder("other-host", 4242, clock())
    git(box.repository, "worktree", "lock", "--reason", other.reason, str(workspace.worktree("r1")))
    clock.advance(599)
    with pytest.raises(WorktreeBusyError, match="other-host:4242"):
        workspace.lock("r1").acquire()
    assert workspace.lock("r1").current_reason() == other.reason  # left as it was
    clock.advance(2)
    with workspace.lock("r1") as lock:
        assert lock.recovered == other


def test_a_lock_hubsync_did_not_write_is_recovered_by_the_age_of_gits_lock_file(
    box: Runtime,
) -> None:
    start_run(box, "r1", "one")
    clock = FakeClock()
    workspace = Workspace(box.repository, box.workspace.root, lock_max_age=600, clock=clock)
    git(
        box.repository,
        "worktree",
        "lock",
        "--reason",
        "do not touch",
        str(workspace.worktree("r1")),
    )
    with pytest.raises(WorktreeBusyError, match="a lock hubsync did not write"):
        workspace.lock("r1").acquire()
    clock.advance(601)
    with workspace.lock("r1") as lock:
        assert lock.recovered == "do not touch"


# -- pushes -----------------------------------------------------------------------------


def test_a_push_to_the_runs_own_branch_takes_no_lease(box: Runtime, remote: str) -> None:
    commit = start_run(box, "r1", "one")
    branch = run_branch("r1")
    effect = spec("r1", "push", EffectKind.GIT_PUSH, branch, remote=remote)
    receipt = GitPushExecutor(box.workspace).execute(lease_free(effect))
    assert receipt["commit"] == commit == remote_ref(remote, f"refs/heads/{branch}")
    assert receipt["before"] == "" and "already" not in receipt
    assert GitPushExecutor(box.workspace).execute(lease_free(effect))["already"] is True
    assert remote_ref(remote, fence_ref(f"refs/heads/{branch}")) == ""  # no fence for it


@pytest.fixture
def shared(tmp_path: Path, redis_client: redis.Redis) -> Iterator[tuple[SharedEffects, ...]]:
    leases = LeaseClient(redis_client)
    ledgers = [EffectsLedger(tmp_path / f"{name}.sqlite") for name in ("a", "b")]
    yield tuple(
        SharedEffects(ledger, leases, holder=name, lease_ttl_ms=30_000)
        for ledger, name in zip(ledgers, ("box-a", "box-b"), strict=True)
    )
    for ledger in ledgers:
        ledger.close()


def claimed(result: object) -> EffectClaim:
    assert isinstance(result, EffectClaim), result
    return result


def test_a_shared_push_records_its_token_on_the_remotes_fence(
    box: Runtime, remote: str, shared: tuple[SharedEffects, ...]
) -> None:
    commit = start_run(box, "r1", "one")
    claim = claimed(shared[0].claim(spec("r1", "push", EffectKind.GIT_PUSH, "main", remote=remote)))
    assert claim.lease is not None
    receipt = GitPushExecutor(box.workspace).execute(Context(claim))
    assert receipt["commit"] == commit == remote_ref(remote, MAIN)
    assert receipt["fence_token"] == claim.lease.token
    mark = FenceMark.read(box.repository, fetched(box, remote, fence_ref(MAIN)))
    assert (mark.token, mark.holder, mark.state) == (claim.lease.token, "box-a", f"pushed {commit}")


def fetched(runtime: Runtime, remote: str, ref: str) -> str:
    git(runtime.repository, "fetch", "--quiet", remote, f"+{ref}:refs/test/fetched")
    return git(runtime.repository, "rev-parse", "refs/test/fetched")


def test_a_superseded_holder_is_refused_by_the_remote_even_after_its_lease_check(
    tmp_path: Path,
    remote: str,
    box: Runtime,
    shared: tuple[SharedEffects, ...],
    redis_client: redis.Redis,
) -> None:
    box_b = make_runtime(tmp_path, remote, "box-b")
    commit_a, commit_b = start_run(box, "ra", "from a"), start_run(box_b, "rb", "from b")
    claim_a = claimed(shared[0].claim(spec("ra", "push", EffectKind.GIT_PUSH, "main")))
    assert claim_a.lease is not None
    fenced_a = claim_fence(
        box.workspace.worktree("ra"), remote, MAIN, commit_a, claim_a.lease.token, "box-a"
    )
    assert LeaseClient(redis_client).check(claim_a.lease).ok  # a's lease check passes here...
    expire_lease(redis_client, claim_a.lease.resource)  # ...then a stalls past its deadline
    claim_b = claimed(shared[1].claim(spec("rb", "push", EffectKind.GIT_PUSH, "main")))
    assert claim_b.lease is not None
    fenced_b = claim_fence(
        box_b.workspace.worktree("rb"), remote, MAIN, commit_b, claim_b.lease.token, "box-b"
    )
    # a resumes before b pushes: main is still where a read it, but the fence moved
    with pytest.raises(FenceSupersededError, match="refused the push"):
        fenced_a.push()
    assert remote_ref(remote, MAIN) == fenced_a.before
    assert fenced_b.push()["commit"] == commit_b == remote_ref(remote, MAIN)
    mark = FenceMark.read(box_b.repository, fetched(box_b, remote, fence_ref(MAIN)))
    assert (mark.token, mark.holder) == (claim_b.lease.token, "box-b")
    # and a's claim under its old token is refused by the fence before anything is pushed
    with pytest.raises(FenceSupersededError, match="superseded: nothing pushed"):
        claim_fence(box.workspace.worktree("ra"), remote, MAIN, commit_a, claim_a.lease.token,
                    "box-a")  # fmt: skip


def test_a_push_that_is_no_fast_forward_is_refused_and_changes_nothing(
    tmp_path: Path, remote: str, box: Runtime, shared: tuple[SharedEffects, ...]
) -> None:
    box_b = make_runtime(tmp_path, remote, "box-b")
    commit_a, commit_b = start_run(box, "ra", "from a"), start_run(box_b, "rb", "from b")
    for runtime, effects, run_id in ((box, shared[0], "ra"), (box_b, shared[1], "rb")):
        claim = claimed(effects.claim(spec(run_id, "push", EffectKind.GIT_PUSH, "main",
                                           remote=remote)))  # fmt: skip
        try:
            GitPushExecutor(runtime.workspace).execute(Context(claim))
        except EffectFailedError as exc:
            assert "not a fast-forward" in str(exc)
            effects.abandon(claim)
        else:
            effects.commit(claim, {})
    assert remote_ref(remote, MAIN) == commit_a
    assert git(box_b.repository, "rev-parse", run_branch("rb")) == commit_b  # not lost


def test_a_remote_url_with_credentials_is_refused_and_never_shown() -> None:
    with pytest.raises(EffectFailedError) as refused:
        check_remote("https://deploy:hunter2-secret@git.example.test/repo.git")
    assert "hunter2" not in str(refused.value) and "git.example.test" in str(refused.value)
    with pytest.raises(EffectFailedError):
        check_remote("https://ghp_0123456789abcdefghijklmnopqrstuvwxyz@git.example.test/r.git")
    assert check_remote("ssh://git@git.example.test/repo.git")
    shown = redact_remote("fatal: unable to access 'https://me:s3cr3t-value@h.test/r.git/'")
    assert "s3cr3t" not in shown and "h.test" in shown


# -- clean-up ---------------------------------------------------------------------------------


def test_a_merged_run_is_cleaned_up_twice_safely_and_an_unmerged_one_never(
    box: Runtime, remote: str
) -> None:
    commit = start_run(box, "r1", "one")
    start_run(box, "r2", "two")
    branch = run_branch("r1")
    for run_id in ("r1", "r2"):
        GitPushExecutor(box.workspace).execute(
            lease_free(spec(run_id, "push", EffectKind.GIT_PUSH, run_branch(run_id), remote=remote))
        )
    git(box.repository, "push", "--quiet", remote, f"{commit}:{MAIN}")  # r1 is merged

    def cleanup(run_id: str) -> dict[str, object]:
        effect = spec(run_id, "cleanup", EffectKind.GIT_CLEANUP, run_branch(run_id),
                      remote=remote, into="main")  # fmt: skip
        return GitCleanupExecutor(box.workspace).execute(lease_free(effect))

    assert cleanup("r1") == {
        "branch": branch,
        "merged_into": MAIN,
        "removed_worktree": True,
        "deleted_local_branch": True,
        "deleted_remote_branch": True,
    }
    assert not box.workspace.worktree("r1").exists()
    assert not box.workspace.has_branch(branch)
    assert remote_ref(remote, f"refs/heads/{branch}") == ""
    again = cleanup("r1")
    assert not any(again[part] for part in ("removed_worktree", "deleted_local_branch",
                                            "deleted_remote_branch"))  # fmt: skip

    with pytest.raises(EffectFailedError, match="not merged"):
        cleanup("r2")
    assert box.workspace.worktree("r2").is_dir() and box.workspace.has_branch(run_branch("r2"))
    assert remote_ref(remote, f"refs/heads/{run_branch('r2')}") != ""


def test_a_push_cut_short_is_settled_by_looking_at_the_remote(
    tmp_path: Path, box: Runtime, remote: str
) -> None:
    commit = start_run(box, "r1", "one")
    ref = f"refs/heads/{run_branch('r1')}"
    flags = tmp_path / "flags"
    hold_pushes(remote, "post-receive", ref, flags)  # the ref moves, the status never comes
    effect = spec("r1", "push", EffectKind.GIT_PUSH, run_branch("r1"), remote=remote)
    try:
        receipt = GitPushExecutor(box.workspace, timeout=2.0).execute(lease_free(effect))
    finally:
        (flags / "release").touch()
    assert (flags / "held").exists()
    assert receipt["settled"] is True and receipt["commit"] == commit == remote_ref(remote, ref)


def test_settling_tells_landed_from_not_executed_from_unknown(box: Runtime, remote: str) -> None:
    main = remote_ref(remote, MAIN)
    assert settle(box.repository, remote, MAIN, main, "0" * 40) == main
    with pytest.raises(NothingExecutedError, match="nothing landed"):
        settle(box.repository, remote, MAIN, "1" * 40, main)
    with pytest.raises(OutcomeUncertainError, match=f"the remote has {main[:12]}"):
        settle(box.repository, remote, MAIN, "1" * 40, "2" * 40)


def test_executors_without_their_workspace_settings_fail_naming_the_variables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("HUBSYNC_GIT_REPOSITORY", "HUBSYNC_GIT_WORKSPACE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HUBSYNC_GIT_WORKSPACE", str(tmp_path))
    with pytest.raises(EffectFailedError, match="need HUBSYNC_GIT_REPOSITORY "):
        GitPushExecutor.from_environment()
    monkeypatch.setenv("HUBSYNC_GIT_REPOSITORY", str(tmp_path))
    monkeypatch.setenv("HUBSYNC_GIT_LOCK_MAX_AGE", "15m")
    executor = GitPushExecutor.from_environment()
    assert executor.workspace.root == tmp_path and executor.workspace.lock_max_age == 900
