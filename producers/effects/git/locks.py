"""``WorktreeLock``: one process at a time works in a run's worktree, and a dead holder's lock
is taken back.

Two locks, for two kinds of reader:

* an OS file lock (``hubsync.core.file_lock.FileLock``, ``flock``) on
  ``<workspace>/locks/<name>.lock``, exclusive and never waited for: the kernel lets one
  process hold it and drops it when that process dies, so two processes on one box
  never work in one worktree at once;
* ``git worktree lock --reason "hubsync <host>:<pid> since <epoch>"``, which every git
  command on every box sharing the repository honours (``git worktree prune`` and
  ``remove`` leave a locked worktree alone).

A git lock without the file lock behind it is stale when its holder is on this host
and its pid is gone, or when it is older than ``max_age`` (a holder on another
host, a lock written by hand); it is then recovered, and the recovery logged.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from hubsync.core.clock import EpochClock, epoch_seconds
from hubsync.core.file_lock import FileLock, FileLockHeldError
from producers.effects.errors import NothingExecutedError
from producers.effects.git.command import run_git

log = logging.getLogger(__name__)

DEFAULT_LOCK_MAX_AGE = 3600.0
"""Seconds after which a worktree lock of a holder this host cannot check is recovered."""
REASON_PREFIX = "hubsync "


class WorktreeBusyError(NothingExecutedError):
    """Another live process works in the worktree: nothing was done, try again later."""


@dataclass(frozen=True)
class LockHolder:
    """Who holds a worktree lock, as its ``git worktree lock`` reason names it."""

    host: str
    pid: int
    since: float

    @property
    def reason(self) -> str:
        """The ``--reason`` text: ``hubsync <host>:<pid> since <epoch seconds>``."""
        return f"{REASON_PREFIX}{self.host}:{self.pid} since {self.since:.3f}"

    @classmethod
    def parse(cls, reason: str) -> LockHolder | None:
        """The holder a reason names, or None for a reason hubsync did not write."""
        if not reason.startswith(REASON_PREFIX):
            return None
        who, _, since = reason.removeprefix(REASON_PREFIX).partition(" since ")
        host, _, pid = who.rpartition(":")
        try:
            return cls(host, int(pid), float(since))
        except ValueError:
            return None


def pid_alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


@dataclass(kw_only=True)
class WorktreeLock:
    """The lock of the worktree at ``worktree`` (of ``repository``), file at ``lock_file``.

    Use as a context manager; entering raises ``WorktreeBusyError`` when another live
    process holds it. ``clock`` gives epoch seconds (a fake in tests).
    """

    repository: Path
    worktree: Path
    lock_file: Path
    max_age: float = DEFAULT_LOCK_MAX_AGE
    clock: EpochClock = epoch_seconds
    host: str = field(default_factory=socket.gethostname)
    recovered: LockHolder | str | None = field(default=None, init=False)
    """The stale lock this acquisition took back (its holder, or a foreign reason)."""
    _file: FileLock | None = field(default=None, init=False, repr=False)

    def __enter__(self) -> WorktreeLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the file lock, then the git lock (recovering a stale one)."""
        self.lock_file.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._file = FileLock(self.lock_file)
        except FileLockHeldError as exc:
            raise WorktreeBusyError(
                f"worktree {self.worktree.name} is in use by another process ({exc.holder})"
            ) from None
        try:
            if self.worktree.exists():
                self._take_git_lock()
        except BaseException:
            self._drop_file_lock()
            raise

    def lock_in_git(self) -> None:
        """Lock a worktree created while the file lock was held (``git worktree add``)."""
        self._take_git_lock()

    def release(self) -> None:
        """Unlock in git (if the worktree still exists), then drop the file lock."""
        try:
            if self.worktree.exists() and self.current_reason() is not None:
                run_git(["worktree", "unlock", str(self.worktree)], self.repository, check=False)
        finally:
            self._drop_file_lock()

    def current_reason(self) -> str | None:
        """The reason of the worktree's git lock, or None when it is not locked."""
        for block in self._porcelain_blocks():
            if block.get("worktree") == str(self.worktree.resolve()):
                return block.get("locked")
        return None

    def _take_git_lock(self) -> None:
        reason = self.current_reason()
        if reason is not None:
            self._recover(reason)
        holder = LockHolder(self.host, os.getpid(), self.clock())
        run_git(
            ["worktree", "lock", "--reason", holder.reason, str(self.worktree)], self.repository
        )

    def _recover(self, reason: str) -> None:
        holder = LockHolder.parse(reason)
        age = self.clock() - holder.since if holder else self._lock_file_age()
        dead = holder is not None and holder.host == self.host and not pid_alive(holder.pid)
        if holder is not None and holder.host == self.host and holder.pid == os.getpid():
            dead = True  # our own, left by an earlier step of this process that crashed
        if not dead and age < self.max_age:
            who = f"{holder.host}:{holder.pid}" if holder else "a lock hubsync did not write"
            raise WorktreeBusyError(
                f"worktree {self.worktree.name} is locked by {who} ({age:.0f}s old; recovered "
                f"after {self.max_age:.0f}s)"
            )
        why = "its holder's pid is gone" if dead else f"it is {age:.0f}s old"
        log.warning("worktree %s: recovered a stale lock (%s): %s", self.worktree.name, reason, why)
        run_git(["worktree", "unlock", str(self.worktree)], self.repository)
        self.recovered = holder or reason

    def _lock_file_age(self) -> float:
        # a reason hubsync did not write has no time in it: git's ``locked`` file has an mtime
        git_dir = run_git(["rev-parse", "--absolute-git-dir"], self.worktree).stdout.strip()
        try:
            return self.clock() - (Path(git_dir) / "locked").stat().st_mtime
        except OSError:
            return 0.0

    def _porcelain_blocks(self) -> list[dict[str, str]]:
        listing = run_git(["worktree", "list", "--porcelain"], self.repository).stdout
        blocks: list[dict[str, str]] = []
        for chunk in listing.split("\n\n"):
            fields: dict[str, str] = {}
            for line in chunk.splitlines():
                name, _, value = line.partition(" ")
                fields[name] = value
            if fields:
                blocks.append(fields)
        return blocks

    def _drop_file_lock(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
