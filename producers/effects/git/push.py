"""Pushes: to the run's own branch (lease-free), and to a shared branch with the remote as a
second fence.

A shared push runs under the effect's lease (``SharedEffects``), and the remote
refuses a superseded holder by itself:

1. ``claim_fence``: read the target branch and ``refs/hubsync/fence/<branch>``
   (``ls-remote``, then fetch both); refuse when the fence already holds a larger
   token (or this token from another holder), or when our commit is no
   fast-forward of the target; then point the fence ref at a marker commit naming
   our token, by a compare-and-swap push (``--force-with-lease`` on the fence's value
   just read). Tokens on the fence only grow.
2. ``FencedPush.push``: one ``git push --atomic`` moves the target to our commit and the
   fence to a second marker, each under ``--force-with-lease`` on the value read at
   claim. A holder whose lease was taken over finds the fence moved by the new
   holder's claim: the remote refuses both refs, even if the old holder's own lease
   check passed just before it stalled. Nothing it pushes lands.

An outcome without a status (killed, timed out, connection lost) is settled by
``remote.settle``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from producers.effects.errors import EffectFailedError, NothingExecutedError, OutcomeUncertainError
from producers.effects.git.command import GIT_TIMEOUT, git_output, redact_remote, run_git
from producers.effects.git.remote import ABSENT, RefUpdate, fetch_ref, ls_remote, push, settle

FENCE_PREFIX = "refs/hubsync/fence/"
"""``refs/hubsync/fence/<branch>``: the highest fencing token that claimed ``<branch>``."""
_SEEN = "refs/worktree/hubsync/seen/"
"""Where a worktree keeps what it fetched at claim (per worktree: never shared)."""
_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_MARK = re.compile(r"^token: (\d+)\nholder: (.+)\nstate: (.+)$", re.MULTILINE)


class FenceSupersededError(NothingExecutedError):
    """The remote's fence refused this holder (a larger token claimed the branch): nothing
    landed. A retry claims again under a new lease and reads the branch afresh."""


def branch_ref(target: str) -> str:
    """``refs/heads/<branch>`` for a target given as a branch, with or without ``refs/heads/``."""
    branch = target.removeprefix("refs/heads/")
    if target.startswith("refs/") and not target.startswith("refs/heads/"):
        raise EffectFailedError(f"a git-push target is a branch, not {target!r}")
    ref = f"refs/heads/{branch}"
    done = run_git(["check-ref-format", ref], Path("."), check=False)
    if done.returncode != 0 or branch.startswith("-"):
        raise EffectFailedError(f"{branch!r} is not a valid branch name")
    return ref


def fence_ref(ref: str) -> str:
    """The fence ref guarding branch ref ``ref``."""
    return FENCE_PREFIX + ref.removeprefix("refs/heads/")


@dataclass(frozen=True)
class FenceMark:
    """What a fence ref's marker commit says: the token, its holder, and what it did."""

    token: int
    holder: str
    state: str

    def write(self, worktree: Path, ref: str) -> str:
        """Make the marker commit (empty tree, no parent) in the repository; its sha."""
        message = (
            f"hubsync fence of {ref}\n\ntoken: {self.token}\nholder: {self.holder}\n"
            f"state: {self.state}\n"
        )
        return git_output(["commit-tree", _EMPTY_TREE, "-m", message], worktree)

    @classmethod
    def read(cls, worktree: Path, sha: str) -> FenceMark:
        """The mark of commit ``sha``; ``EffectFailedError`` when hubsync did not write it."""
        body = git_output(["cat-file", "commit", sha], worktree)
        found = _MARK.search(body)
        if found is None:
            raise EffectFailedError(
                f"the fence ref holds {sha[:12]}, which is no hubsync fence marker; an "
                "operator must set it right before any shared push goes ahead"
            )
        return cls(int(found.group(1)), found.group(2), found.group(3))


def push_run_branch(
    worktree: Path, remote: str, ref: str, commit: str, *, timeout: float = GIT_TIMEOUT
) -> dict[str, Any]:
    """Push ``commit`` to the run's own branch ``ref`` (no lease: the run alone writes it)."""
    before = ls_remote(worktree, remote, [ref])[ref]
    receipt = _receipt(remote, ref, commit, before)
    if before == commit:
        return receipt | {"already": True}
    outcome = push(worktree, remote, [RefUpdate(ref, commit, before)], timeout=timeout)
    if outcome.refused:
        raise NothingExecutedError(f"the remote refused the push to {ref}: {outcome.refused}")
    if outcome.unknown:
        settle(worktree, remote, ref, commit, before)
        return receipt | {"settled": True}
    return receipt


@dataclass(frozen=True)
class FencedPush:
    """A shared push whose claim is recorded on the remote's fence; ``push`` completes it."""

    worktree: Path
    remote: str
    ref: str
    commit: str
    before: str
    """The target's value read at claim (``ABSENT``: the branch did not exist)."""
    token: int
    holder: str
    claimed_mark: str
    """The fence ref's value after our claim (``""`` when the target already held our commit)."""

    @property
    def already(self) -> bool:
        """The target held our commit at claim: nothing to push."""
        return self.before == self.commit

    def push(self, *, timeout: float = GIT_TIMEOUT) -> dict[str, Any]:
        """Move the target and the fence together (atomic, each under its lease); the receipt."""
        receipt = _receipt(self.remote, self.ref, self.commit, self.before) | {
            "fence_token": self.token
        }
        if self.already:
            return receipt | {"already": True}
        fence = fence_ref(self.ref)
        pushed = FenceMark(self.token, self.holder, f"pushed {self.commit}")
        updates = [
            RefUpdate(self.ref, self.commit, self.before),
            RefUpdate(fence, pushed.write(self.worktree, self.ref), self.claimed_mark),
        ]
        outcome = push(self.worktree, self.remote, updates, atomic=True, timeout=timeout)
        if outcome.refused:
            raise FenceSupersededError(
                f"the remote refused the push to {self.ref} under token {self.token} "
                f"({'; '.join(outcome.refused)}): another holder moved the branch or its "
                "fence since the claim; nothing landed"
            )
        if outcome.unknown:
            settle(self.worktree, self.remote, self.ref, self.commit, self.before)
            return receipt | {"settled": True}
        return receipt


def claim_fence(
    worktree: Path,
    remote: str,
    ref: str,
    commit: str,
    token: int,
    holder: str,
    *,
    timeout: float = GIT_TIMEOUT,
) -> FencedPush:
    """Record ``token`` on the remote's fence of ``ref`` (compare-and-swap); the push to make."""
    fence = fence_ref(ref)
    seen = ls_remote(worktree, remote, [ref, fence])
    before, fence_before = seen[ref], seen[fence]
    claim = FencedPush(worktree, remote, ref, commit, before, token, holder, "")
    if before == commit:
        return claim
    if fence_before != ABSENT:
        fetch_ref(worktree, remote, fence, _SEEN + "fence")
        mark = FenceMark.read(worktree, fence_before)
        if mark.token > token or (mark.token == token and mark.holder != holder):
            raise FenceSupersededError(
                f"the remote's fence of {ref} holds token {mark.token} ({mark.holder}); "
                f"token {token} is superseded: nothing pushed"
            )
    if before != ABSENT:
        fetch_ref(worktree, remote, ref, _SEEN + "target")
        if not _is_ancestor(worktree, before, commit):
            raise EffectFailedError(
                f"{commit[:12]} is not a fast-forward of {ref} ({before[:12]}): pushing it "
                "would drop commits; rebase the run branch onto it and push again"
            )
    mark_sha = FenceMark(token, holder, "claimed").write(worktree, ref)
    outcome = push(worktree, remote, [RefUpdate(fence, mark_sha, fence_before)], timeout=timeout)
    if not outcome.landed:
        try:
            settle(worktree, remote, fence, mark_sha, fence_before)
        except (NothingExecutedError, OutcomeUncertainError):
            raise FenceSupersededError(
                f"the fence of {ref} could not be claimed under token {token} "
                f"({'; '.join(outcome.refused) or outcome.detail}): nothing pushed"
            ) from None
    return FencedPush(worktree, remote, ref, commit, before, token, holder, mark_sha)


def _is_ancestor(worktree: Path, older: str, newer: str) -> bool:
    done = run_git(["merge-base", "--is-ancestor", older, newer], worktree, check=False)
    return done.returncode == 0


def _receipt(remote: str, ref: str, commit: str, before: str) -> dict[str, Any]:
    return {"remote": redact_remote(remote), "ref": ref, "commit": commit, "before": before}
