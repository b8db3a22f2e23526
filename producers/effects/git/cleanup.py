"""Clean-up of a merged run: its worktree, its local branch and its remote branch go.

Lease-free (only the run writes its branch) and idempotent: each part is removed
only if it is still there, so a second run, or a run after a crash half-way,
finishes the job and reports what it found. A branch not merged into the target
is left whole (``EffectFailedError``): nothing is removed.
"""

from __future__ import annotations

import logging
from typing import Any

from producers.effects.errors import EffectFailedError, NothingExecutedError
from producers.effects.git.command import redact_remote, run_git
from producers.effects.git.remote import ABSENT, RefUpdate, ls_remote, push, settle
from producers.effects.git.worktrees import Workspace

log = logging.getLogger(__name__)

_MERGED_INTO = "refs/hubsync/merged-check/"
"""Where the target's commit is fetched to check the run branch is merged into it."""


def cleanup_merged_run(workspace: Workspace, run_id: str, remote: str, into: str) -> dict[str, Any]:
    """Remove run ``run_id``'s worktree, local and remote branch once it is merged into ``into``
    (a branch of ``remote``); the receipt says what was removed."""
    repository = workspace.repository
    branch = workspace.branch(run_id)
    ref, into_ref = f"refs/heads/{branch}", f"refs/heads/{into.removeprefix('refs/heads/')}"
    seen = ls_remote(repository, remote, [ref, into_ref])
    if seen[into_ref] == ABSENT:
        raise EffectFailedError(f"{into_ref} is not on the remote: nothing to check the merge by")
    local_tip = workspace.commit_of(branch) if workspace.has_branch(branch) else ABSENT
    tips = {tip for tip in (local_tip, seen[ref]) if tip != ABSENT}
    if tips:
        check_ref = _MERGED_INTO + workspace.worktree(run_id).name
        refspecs = [f"+{into_ref}:{check_ref}"]
        if seen[ref] != ABSENT:  # the remote tip may be a commit this repository lacks
            refspecs.append(f"+{ref}:{check_ref}-tip")
        run_git(["fetch", "--no-tags", "--quiet", "--", remote, *refspecs], repository)
        try:
            unmerged = [t for t in tips if not _merged(workspace, t, check_ref)]
        finally:
            for name in (check_ref, f"{check_ref}-tip"):
                run_git(["update-ref", "-d", name], repository, check=False)
        if unmerged:
            raise EffectFailedError(
                f"{branch} is not merged into {into_ref} ({unmerged[0][:12]} is not in it); "
                "nothing removed"
            )
    with workspace.lock(run_id):
        path = workspace.worktree(run_id)
        removed_worktree = path.is_dir()
        if removed_worktree:
            run_git(["worktree", "unlock", str(path)], repository, check=False)
            run_git(["worktree", "remove", "--force", str(path)], repository)
        run_git(["worktree", "prune"], repository)
        deleted_local = local_tip != ABSENT
        if deleted_local:
            run_git(["branch", "-D", branch], repository)
    deleted_remote = seen[ref] != ABSENT
    if deleted_remote:
        outcome = push(repository, remote, [RefUpdate(ref, "", seen[ref])])
        if outcome.refused:
            raise NothingExecutedError(f"the remote refused to delete {ref}: {outcome.refused}")
        if outcome.unknown:
            settle(repository, remote, ref, ABSENT, seen[ref])
    log.info(
        "run %s cleaned up on %s: worktree %s, local branch %s, remote branch %s",
        run_id,
        redact_remote(remote),
        removed_worktree,
        deleted_local,
        deleted_remote,
    )
    return {
        "branch": branch,
        "merged_into": into_ref,
        "removed_worktree": removed_worktree,
        "deleted_local_branch": deleted_local,
        "deleted_remote_branch": deleted_remote,
    }


def _merged(workspace: Workspace, tip: str, into: str) -> bool:
    done = run_git(["merge-base", "--is-ancestor", tip, into], workspace.repository, check=False)
    return done.returncode == 0
