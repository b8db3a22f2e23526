"""Git effects on the real ``git`` command line: a worktree per run, pushes fenced twice.

* ``worktrees.Workspace``: a run's worktree and branch (``hubsync/run-<run_id>``);
* ``locks.WorktreeLock``: one process per worktree, stale locks recovered;
* ``push``: the run's own branch lease-free; a shared branch under the effect's
  lease and the remote's fence ref, in one atomic push;
* ``remote``: ``ls-remote``, porcelain pushes, unknown outcomes settled by looking;
* ``cleanup``: a merged run's worktree and branches removed;
* ``executors``: the ``git-branch``, ``git-commit``, ``git-push`` and ``git-cleanup``
  executors the effect jobs run.
"""
