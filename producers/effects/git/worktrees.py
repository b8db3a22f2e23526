"""``Workspace``: a worktree per run, on the run's own branch, under one workspace directory.

``<workspace>/worktrees/run-<name>`` holds the checkout of run ``<run_id>`` on branch
``hubsync/run-<name>`` (``producers.effects.kinds.run_branch``: deterministic, and a
run id's characters a branch cannot hold made safe), added to the runtime's
repository with ``git worktree add``. ``<workspace>/locks/run-<name>.lock`` is its
OS lock file (``locks.WorktreeLock``). Every step that touches a worktree holds
its lock for as long as it works there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from hubsync.core.clock import EpochClock, epoch_seconds
from producers.effects.errors import EffectFailedError
from producers.effects.git.command import git_output, run_git
from producers.effects.git.locks import DEFAULT_LOCK_MAX_AGE, WorktreeLock
from producers.effects.kinds import RUN_BRANCH_PREFIX, run_branch

log = logging.getLogger(__name__)

EFFECT_TRAILER = "Hubsync-Effect"
"""The trailer naming the effect key on each commit a ``git-commit`` effect makes."""


@dataclass(frozen=True)
class Workspace:
    """The runtime's ``repository`` and the ``root`` its run worktrees live under."""

    repository: Path
    root: Path
    lock_max_age: float = DEFAULT_LOCK_MAX_AGE
    clock: EpochClock = field(default=epoch_seconds, compare=False)

    def branch(self, run_id: str) -> str:
        """The run's branch, ``hubsync/run-<name>``."""
        return run_branch(run_id)

    def worktree(self, run_id: str) -> Path:
        """Where the run's worktree is (or will be)."""
        return self.root / "worktrees" / self._dir_name(run_id)

    def lock(self, run_id: str) -> WorktreeLock:
        """The run's worktree lock (not yet taken: use it as a context manager)."""
        return WorktreeLock(
            repository=self.repository,
            worktree=self.worktree(run_id),
            lock_file=self.root / "locks" / f"{self._dir_name(run_id)}.lock",
            max_age=self.lock_max_age,
            clock=self.clock,
        )

    @contextmanager
    def using(self, run_id: str) -> Iterator[Path]:
        """Hold the run's worktree lock while the block works in the worktree (which must exist)."""
        with self.lock(run_id):
            path = self.worktree(run_id)
            if not path.is_dir():
                raise EffectFailedError(
                    f"run {run_id} has no worktree: a git-branch effect creates it first"
                )
            yield path

    def ensure_worktree(self, run_id: str, start: str) -> tuple[Path, bool]:
        """The run's worktree, added on its branch at ``start`` if missing; (path, created).

        Idempotent: an existing worktree (or an existing branch) is kept as it is.
        """
        path = self.worktree(run_id)
        branch = self.branch(run_id)
        with self.lock(run_id) as lock:
            if path.is_dir():
                return path, False
            self.root.joinpath("worktrees").mkdir(parents=True, exist_ok=True)
            # a worktree whose directory vanished is pruned, so its branch can be checked out
            run_git(["worktree", "prune"], self.repository)
            if self.has_branch(branch):
                run_git(["worktree", "add", str(path), branch], self.repository)
            else:
                self._require_commit(start)
                run_git(["worktree", "add", "-b", branch, str(path), start], self.repository)
            lock.lock_in_git()
            log.info("run %s: worktree added on %s", run_id, branch)
            return path, True

    def has_branch(self, branch: str) -> bool:
        """Whether the repository has local branch ``branch``."""
        done = run_git(
            ["show-ref", "--verify", "--quiet", f"refs/heads/{branch}"],
            self.repository,
            check=False,
        )
        return done.returncode == 0

    def commit_of(self, ref: str) -> str:
        """The commit ``ref`` names in the repository; ``EffectFailedError`` if none."""
        return self._require_commit(ref)

    def _require_commit(self, ref: str) -> str:
        done = run_git(
            ["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], self.repository, check=False
        )
        if done.returncode != 0 or ref.startswith("-"):
            raise EffectFailedError(f"{ref!r} names no commit in the repository")
        return done.stdout.strip()

    @staticmethod
    def _dir_name(run_id: str) -> str:
        return run_branch(run_id).removeprefix(RUN_BRANCH_PREFIX.rpartition("/")[0] + "/")


def head_of(worktree: Path) -> str:
    """The commit checked out in ``worktree``."""
    return git_output(["rev-parse", "HEAD"], worktree)
