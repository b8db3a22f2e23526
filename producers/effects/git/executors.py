"""The git executors: ``git-branch``, ``git-commit``, ``git-push`` and ``git-cleanup``.

Each takes the claim context the effect job hands every executor (``.claim``) and
returns a receipt, or raises one of the executor errors
(``producers.effects.errors``). They are registered by name with the other
executors (``consumers.jobs.effect_executors``) and read their workspace from
``HUBSYNC_GIT_*`` (``GitSettings``).

Payloads: ``git-branch`` ``{"start": REF}`` (where a new run branch starts);
``git-commit`` ``{"message": TEXT}`` (commits everything changed in the run's
worktree); ``git-push`` ``{"remote": NAME_OR_URL, "source": REF}`` (``source``:
default the run's branch); ``git-cleanup`` ``{"remote": ..., "into": BRANCH}``.
The target of ``git-branch``, ``git-commit`` and ``git-cleanup`` is the run's
branch; of ``git-push`` the branch pushed to.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, Self

from pydantic import Field, ValidationError

from hubsync.core.durations import Duration
from hubsync.core.settings import HubsyncSettings
from producers.effects.errors import EffectFailedError
from producers.effects.git.cleanup import cleanup_merged_run
from producers.effects.git.command import GIT_TIMEOUT, check_remote, git_output, run_git
from producers.effects.git.locks import DEFAULT_LOCK_MAX_AGE
from producers.effects.git.push import branch_ref, claim_fence, push_run_branch
from producers.effects.git.worktrees import EFFECT_TRAILER, Workspace, head_of
from producers.effects.kinds import requires_lease
from producers.effects.records import EffectClaim


class GitSettings(HubsyncSettings):
    """Where the git executors work (env prefix ``HUBSYNC_``)."""

    git_repository: Path = Field(
        description="The runtime's clone the run worktrees are added to (git worktree add)."
    )
    git_workspace: Path = Field(
        description="Directory of the run worktrees (worktrees/) and their lock files (locks/)."
    )
    git_lock_max_age: Duration = Field(
        default=DEFAULT_LOCK_MAX_AGE,
        gt=0,
        description="Age after which a worktree lock whose holder cannot be checked (another "
        "host, or not written by hubsync) is recovered.",
    )
    git_timeout: Duration = Field(
        default=GIT_TIMEOUT,
        gt=0,
        description="Seconds a git command may run; a push cut short is settled by ls-remote.",
    )

    def workspace(self) -> Workspace:
        """The workspace these settings name."""
        return Workspace(self.git_repository, self.git_workspace, self.git_lock_max_age)


class ClaimContext(Protocol):
    """What an executor is handed: the granted claim (key, spec, lease)."""

    @property
    def claim(self) -> EffectClaim:
        """The claim the effect runs under."""
        ...


class GitExecutor:
    """Common ground of the git executors: the workspace and the git timeout."""

    def __init__(self, workspace: Workspace, timeout: float = GIT_TIMEOUT) -> None:
        self.workspace = workspace
        self.timeout = timeout

    @classmethod
    def from_environment(cls) -> Self:
        """An executor on the workspace ``HUBSYNC_GIT_*`` names."""
        try:
            settings = GitSettings()  # the fields come from the environment
        except ValidationError as exc:
            wrong = ", ".join(f"HUBSYNC_{str(e['loc'][0]).upper()}" for e in exc.errors())
            raise EffectFailedError(
                f"the git executors need {wrong} (missing or invalid): set them for the worker"
            ) from None
        return cls(settings.workspace(), settings.git_timeout)

    def own_branch(self, claim: EffectClaim) -> str:
        """The run's branch, which must be the effect's target."""
        branch = self.workspace.branch(claim.spec.run_id)
        if claim.spec.target.removeprefix("refs/heads/") != branch:
            raise EffectFailedError(
                f"a {claim.spec.kind.value} effect targets its run's branch {branch}"
            )
        return branch


def _text(payload: dict[str, Any], name: str, default: str | None = None) -> str:
    value = payload.get(name, default)
    if not isinstance(value, str) or not value:
        raise EffectFailedError(f"the effect's payload needs {name!r} (a non-empty string)")
    return value


class GitBranchExecutor(GitExecutor):
    """``git-branch``: the run's worktree, on its branch started at ``payload["start"]``."""

    def execute(self, context: ClaimContext) -> dict[str, Any]:
        """Add the worktree (kept as it is if it exists)."""
        claim = context.claim
        branch = self.own_branch(claim)
        start = _text(claim.spec.payload, "start", "HEAD")
        path, created = self.workspace.ensure_worktree(claim.spec.run_id, start)
        return {
            "branch": branch,
            "worktree": f"worktrees/{path.name}",
            "head": head_of(path),
            "created": created,
        }


class GitCommitExecutor(GitExecutor):
    """``git-commit``: commit everything changed in the run's worktree, with the effect's
    key as a trailer; a retry finds that commit at HEAD and makes no second one."""

    def execute(self, context: ClaimContext) -> dict[str, Any]:
        """Commit under the worktree lock."""
        claim = context.claim
        branch = self.own_branch(claim)
        message = _text(claim.spec.payload, "message")
        with self.workspace.using(claim.spec.run_id) as path:
            trailer = f"{EFFECT_TRAILER}: {claim.effect_key}"
            if trailer in git_output(["log", "-1", "--format=%B"], path).splitlines():
                return {"branch": branch, "commit": head_of(path), "already": True}
            run_git(["add", "--all"], path)
            if run_git(["diff", "--cached", "--quiet"], path, check=False).returncode == 0:
                raise EffectFailedError(f"nothing to commit in the worktree of {branch}")
            run_git(["commit", "--quiet", "--no-verify", "-m", message, "-m", trailer], path)
            return {"branch": branch, "commit": head_of(path)}


class GitPushExecutor(GitExecutor):
    """``git-push``: the run's branch (or ``payload["source"]``) to the target branch.

    To the run's own branch: no lease. To any other: under the effect's lease, with the
    remote's fence (``push.claim_fence``, then one atomic push).
    """

    def execute(self, context: ClaimContext) -> dict[str, Any]:
        """Push under the worktree lock."""
        claim = context.claim
        spec = claim.spec
        remote = check_remote(_text(spec.payload, "remote"))
        ref = branch_ref(spec.target)
        with self.workspace.using(spec.run_id) as path:
            source = _text(spec.payload, "source", self.workspace.branch(spec.run_id))
            commit = self.workspace.commit_of(source)
            if not requires_lease(spec.kind, spec.target, spec.run_id):
                return push_run_branch(path, remote, ref, commit, timeout=self.timeout)
            if claim.lease is None:
                raise EffectFailedError(f"a push to {ref} is shared and must hold a lease")
            fenced = claim_fence(
                path, remote, ref, commit, claim.lease.token, claim.lease.holder,
                timeout=self.timeout,
            )  # fmt: skip
            return fenced.push(timeout=self.timeout)


class GitCleanupExecutor(GitExecutor):
    """``git-cleanup``: once the run's branch is merged into ``payload["into"]``, remove its
    worktree and its local and remote branches (lease-free, idempotent)."""

    def execute(self, context: ClaimContext) -> dict[str, Any]:
        """Clean up, or refuse (nothing removed) while the branch is not merged."""
        claim = context.claim
        self.own_branch(claim)
        remote = check_remote(_text(claim.spec.payload, "remote"))
        into = _text(claim.spec.payload, "into")
        return cleanup_merged_run(self.workspace, claim.spec.run_id, remote, into)
