"""Reading and writing the remote: ``ls-remote``, fetching one ref, pushing with porcelain
status, and settling an unknown outcome by looking.

A push either reports a status line per ref (``git push --porcelain``) or does not
(killed, timed out, connection lost). A ``!`` line is the remote's refusal:
nothing of an ``--atomic`` push landed. No status at all is an unknown outcome,
settled by ``settle``: the target at our commit is committed, still at the value
read before is nothing executed (safe to retry), anything else is parked
``blocked_uncertain`` with what was seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from producers.effects.errors import NothingExecutedError, OutcomeUncertainError
from producers.effects.git.command import GIT_TIMEOUT, GitCommandError, redact_remote, run_git

ABSENT = ""
"""The value of a ref the remote does not have (``--force-with-lease=<ref>:`` expects that)."""


def ls_remote(repository: Path, remote: str, refs: Sequence[str]) -> dict[str, str]:
    """The remote's value of each of ``refs`` (full names); ``ABSENT`` for a missing one."""
    done = run_git(["ls-remote", "--", remote, *refs], repository)
    seen = {ref: ABSENT for ref in refs}
    for line in done.stdout.splitlines():
        sha, _, name = line.partition("\t")
        if name in seen:
            seen[name] = sha
    return seen


def fetch_ref(worktree: Path, remote: str, ref: str, local: str) -> None:
    """Fetch the remote's ``ref`` into ``local`` (a ``refs/worktree/...`` ref: per worktree)."""
    run_git(["fetch", "--no-tags", "--quiet", "--", remote, f"+{ref}:{local}"], worktree)


@dataclass(frozen=True)
class RefUpdate:
    """Set ``ref`` on the remote to ``new`` if it is still ``expected`` (``ABSENT``: missing)."""

    ref: str
    new: str
    expected: str

    @property
    def refspec(self) -> str:
        """``<new>:<ref>``, or ``:<ref>`` to delete it."""
        return f"{self.new}:{self.ref}"

    @property
    def lease(self) -> str:
        """``--force-with-lease=<ref>:<expected>``."""
        return f"--force-with-lease={self.ref}:{self.expected}"


@dataclass(frozen=True)
class PushOutcome:
    """What ``push`` learned: ``landed`` (every ref), ``refused`` (the remote said no, with
    its reasons) or neither (``unknown``: no status came back)."""

    landed: bool
    refused: tuple[str, ...] = ()
    detail: str = ""

    @property
    def unknown(self) -> bool:
        """No status line came back: the push may or may not have landed."""
        return not self.landed and not self.refused


def push(
    repository: Path,
    remote: str,
    updates: Sequence[RefUpdate],
    *,
    atomic: bool = False,
    timeout: float = GIT_TIMEOUT,
) -> PushOutcome:
    """Push ``updates`` in one ``git push --porcelain`` (``--atomic``: all or none), each
    under ``--force-with-lease`` on its expected value."""
    args = ["push", "--porcelain", *(u.lease for u in updates)]
    if atomic:
        args.append("--atomic")
    args += ["--", remote, *(u.refspec for u in updates)]
    try:
        done = run_git(args, repository, check=False, timeout=timeout)
    except GitCommandError as exc:  # timed out: whatever git printed, no verdict
        return PushOutcome(False, detail=exc.output)
    statuses = _statuses(done.stdout, {u.ref for u in updates})
    refused = tuple(f"{ref} {why}" for ref, (flag, why) in statuses.items() if flag == "!")
    if done.returncode == 0 and len(statuses) == len(updates) and not refused:
        return PushOutcome(True)
    detail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
    return PushOutcome(False, refused, detail)


def settle(repository: Path, remote: str, ref: str, ours: str, before: str) -> str:
    """Look at ``ref`` on the remote after a push whose outcome is unknown.

    Returns ``ours`` when it landed; raises ``NothingExecutedError`` when the ref is
    still ``before``, ``OutcomeUncertainError`` (with what it saw) otherwise.
    """
    try:
        seen = ls_remote(repository, remote, [ref])[ref]
    except GitCommandError as exc:
        raise OutcomeUncertainError(
            f"push to {ref} on {redact_remote(remote)} ended without a status and the remote "
            f"could not be read to settle it: {exc}"
        ) from None
    if seen == ours:
        return ours
    if seen == before:
        raise NothingExecutedError(
            f"push to {ref} ended without a status; the remote still has {_short(before)}: "
            "nothing landed"
        )
    raise OutcomeUncertainError(
        f"push to {ref} ended without a status; the remote has {_short(seen)}, neither our "
        f"{_short(ours)} nor the {_short(before)} read before"
    )


def _statuses(stdout: str, refs: set[str]) -> dict[str, tuple[str, str]]:
    # porcelain: "<flag>\t<from>:<to>\t<summary> (<reason>)" per ref, between "To" and "Done"
    found: dict[str, tuple[str, str]] = {}
    for line in stdout.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and len(parts[0]) == 1:
            ref = parts[1].rpartition(":")[2]
            if ref in refs:
                found[ref] = (parts[0], parts[2])
    return found


def _short(sha: str) -> str:
    return sha[:12] if sha else "no such ref"
