"""A push to a shared branch under a lease, with the remote as the second fence.

Real git, a bare remote in the work dir (``file://``) and two boxes with a clone each.
Each runs a step on its own run branch (``git-branch``, ``git-commit``: lease-free).
Box A claims the push to ``main`` (short lease), records its token on the remote's
fence, then stalls past its deadline; box B takes the lease over under a larger
token and records it on the fence. A wakes up before B has pushed (``main`` has not
moved) and pushes: the remote refuses it, because the fence moved. B's push lands.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from consumers.jobs.effect_executors import ExecutionContext
from hubstore.leases import LeaseClient, LeaseState
from hubsync.core.connections import RedisTarget, connect
from producers.effects.errors import EffectError
from producers.effects.git.command import git_output, run_git
from producers.effects.git.executors import GitBranchExecutor, GitCommitExecutor
from producers.effects.git.push import FencedPush, FenceMark, claim_fence, fence_ref
from producers.effects.git.worktrees import Workspace
from producers.effects.kinds import EffectKind, run_branch
from producers.effects.ledger import EffectsLedger
from producers.effects.records import EffectClaim, EffectSpec
from producers.effects.shared import SharedEffects

MAIN = "refs/heads/main"


class _Box:
    """One box: its clone, its workspace and its effects."""

    def __init__(self, name: str, root: Path, url: str, leases: LeaseClient, ttl_ms: int) -> None:
        self.name = name
        repository = root / name / "repo"
        run_git(["clone", "--quiet", url, str(repository)], root)
        self.workspace = Workspace(repository, root / name / "workspace")
        self.ledger = EffectsLedger(root / name / "effects.sqlite")
        self.effects = SharedEffects(self.ledger, leases, holder=name, lease_ttl_ms=ttl_ms)
        self.run_id = f"demo-{name}"

    def claim(self, step: str, kind: EffectKind, target: str, **payload: str) -> EffectClaim:
        spec = EffectSpec(self.run_id, step, f"{step}-1", kind, target, dict(payload))
        claim = self.effects.claim(spec)
        assert isinstance(claim, EffectClaim), claim
        return claim

    def commit_on_run_branch(self) -> str:
        """git-branch then git-commit on the run's own branch (lease-free); the commit."""
        branch = run_branch(self.run_id)
        claim = self.claim("branch", EffectKind.GIT_BRANCH, branch, start="main")
        self.effects.commit(
            claim, GitBranchExecutor(self.workspace).execute(ExecutionContext(claim))
        )
        worktree = self.workspace.worktree(self.run_id)
        (worktree / f"{self.name}.txt").write_text(f"written by {self.name}\n")
        claim = self.claim("commit", EffectKind.GIT_COMMIT, branch, message=f"from {self.name}")
        receipt = GitCommitExecutor(self.workspace).execute(ExecutionContext(claim))
        self.effects.commit(claim, receipt)
        return str(receipt["commit"])

    def fence(self, claim: EffectClaim, url: str) -> FencedPush:
        assert claim.lease is not None
        commit = self.workspace.commit_of(run_branch(self.run_id))
        worktree = self.workspace.worktree(self.run_id)
        return claim_fence(worktree, url, MAIN, commit, claim.lease.token, self.name)


def shared_branch_push(redis_target: RedisTarget, workdir: Path) -> dict[str, Any]:
    """Stage the stalled push (git repositories under ``workdir/git``); what the summary shows."""
    if shutil.which("git") is None:
        return {"skipped": "git is not installed"}
    root = workdir / "git"
    root.mkdir(parents=True, exist_ok=True)
    url = _seed_remote(root)
    leases = LeaseClient(connect(redis_target))
    box_a = _Box("box-a", root, url, leases, ttl_ms=300)
    box_b = _Box("box-b", root, url, leases, ttl_ms=5_000)
    try:
        box_a.commit_on_run_branch()
        commit_b = box_b.commit_on_run_branch()
        claim_a = box_a.claim("push", EffectKind.GIT_PUSH, "main", remote=url)
        fenced_a = box_a.fence(claim_a, url)
        assert claim_a.lease is not None
        # box A now stalls (a GC pause, a frozen VM) past its lease deadline
        deadline = time.monotonic() + 10
        while (
            leases.show(claim_a.lease.resource).state is not LeaseState.EXPIRED
            and time.monotonic() < deadline
        ):
            time.sleep(0.02)
        claim_b = box_b.claim("push", EffectKind.GIT_PUSH, "main", remote=url)
        fenced_b = box_b.fence(claim_b, url)
        main_before = _remote_value(root, url, MAIN)
        try:  # A wakes up before B pushes: main has not moved, the fence has
            fenced_a.push()
            refusal = ""
        except EffectError as exc:
            refusal = str(exc)
            box_a.effects.abandon(claim_a)
        box_b.effects.commit(claim_b, fenced_b.push())
        main_after = _remote_value(root, url, MAIN)
        mark = _fence_mark(box_b.workspace.repository, url)
        assert claim_b.lease is not None
        return {
            "token_a": claim_a.lease.token,
            "token_b": claim_b.lease.token,
            "main_unmoved_when_a_pushed": main_before == fenced_a.before,
            "a_refused_by_remote": bool(refusal),
            "a_refusal": refusal,
            "main_holds_only_b": main_after == commit_b,
            "main": main_after[:12],
            "fence_token": mark.token,
        }
    finally:
        box_a.ledger.close()
        box_b.ledger.close()
        leases.redis.close()


def _seed_remote(root: Path) -> str:
    bare, seed = root / "remote.git", root / "seed"
    run_git(["init", "--quiet", "--bare", "-b", "main", str(bare)], root)
    run_git(["init", "--quiet", "-b", "main", str(seed)], root)
    (seed / "README").write_text("a shared branch\n")
    run_git(["add", "README"], seed)
    run_git(["commit", "--quiet", "-m", "first"], seed)
    run_git(["push", "--quiet", bare.as_uri(), "main"], seed)
    return bare.as_uri()


def _remote_value(root: Path, url: str, ref: str) -> str:
    return git_output(["ls-remote", url, ref], root).partition("\t")[0]


def _fence_mark(repository: Path, url: str) -> FenceMark:
    seen = "refs/hubsync/demo-fence"
    run_git(["fetch", "--quiet", url, f"+{fence_ref(MAIN)}:{seen}"], repository)
    return FenceMark.read(repository, git_output(["rev-parse", seen], repository))
