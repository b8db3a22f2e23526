"""Files that hold keys or events stay private: created 0600, never through a link.

The runtime's registry (its key), the hub database (every runtime's key), the
runtime's stores and the effects ledger, with their SQLite sidecars and
backups, are opened by path, and SQLite follows a symbolic link at the main
file's path. So before one is opened, each of its files that exists is looked
at with ``lstat``, never through a link:

* a symbolic link (dangling or not) or anything but a regular file is refused
  with ``UnsafeFileError`` naming the path: writing through it would put a key
  wherever the link points, with whatever mode the file there has;
* a regular file group or others may access is tightened (``fchmod`` on a
  descriptor opened with ``O_NOFOLLOW``: group and other bits off, the owner's
  kept) and the change logged with both modes; a file this user may not change
  (another user's) is refused, naming its real mode.

A missing file is created here, mode 0600, with ``O_CREAT | O_EXCL`` (which
never follows a link), before SQLite opens it. Directories are the operator's:
hubsync creates missing ones 0700 and follows an existing one even if it is a
link (a state dir moved to a bigger disk), since who may write the directory
may replace any file in it anyway.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hubsync.core.errors import UnsafeFileError

__all__ = [
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "Exposure",
    "create_private_dirs",
    "create_private_file",
    "exposure",
    "file_mode",
    "modes_left_alone",
    "new_private_file",
    "secure_existing_files",
]

log = logging.getLogger(__name__)

PRIVATE_FILE_MODE = 0o600
"""Mode of every file hubsync creates (SQLite gives a file's -wal and -shm the same mode)."""
PRIVATE_DIR_MODE = 0o700
"""Mode of every directory hubsync creates (a state dir, its stores/, a hub file's directory)."""

_OPEN_NO_LINK = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def create_private_dirs(path: Path) -> None:
    """Create ``path`` and its missing parents, each mode 0700 whatever the umask.

    Directories that already exist are left as they are: they are the
    operator's, and their mode is the operator's choice.
    """
    missing = []
    for directory in (path, *path.parents):
        if directory.exists():
            break
        missing.append(directory)
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:  # another process made it first: theirs to have set
            continue
        os.chmod(directory, PRIVATE_DIR_MODE)  # the umask may have taken bits off


def create_private_file(path: Path) -> None:
    """Create ``path`` (mode 0600) and its directories (0700) if missing.

    An existing regular file is left to ``secure_existing_files``; a symbolic
    link in its place, even a dangling one, is refused (``UnsafeFileError``).
    """
    create_private_dirs(path.parent)
    try:
        fd = new_private_file(path)
    except FileExistsError:
        secure_existing_files([path])
        return
    os.close(fd)


def new_private_file(path: Path) -> int:
    """Create ``path``, which must not exist, mode 0600; return its descriptor, open for writing.

    The file is created with that mode (``O_EXCL``: never an existing file or a
    symlink's target), so no moment exists when another user could open it;
    ``fchmod`` only restores bits a umask took off, before anything is written.
    Raises ``FileExistsError`` if ``path`` exists (a link included), ``OSError`` if it
    cannot be made.
    """
    fd = os.open(
        path,
        os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_WRONLY | os.O_CLOEXEC,
        PRIVATE_FILE_MODE,
    )
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)  # exactly 0600, whatever the umask
    except OSError:
        os.close(fd)
        raise
    return fd


def file_mode(path: Path) -> int:
    """The permission bits of ``path`` itself (a link's own, not its target's)."""
    return stat.S_IMODE(os.lstat(path).st_mode)


@dataclass(frozen=True, slots=True)
class Exposure:
    """Why a file is not private: a link, not a regular file, or a mode open to others."""

    path: Path
    mode: int
    """Its permission bits (a link's own)."""
    kind: Literal["link", "not a regular file", "mode"]
    """What is wrong: a symbolic link, another kind of file, or the mode."""
    detail: str = ""
    """A link's target."""

    def __str__(self) -> str:
        if self.kind == "link":
            return f"{self.path} is a symbolic link (to {self.detail})"
        if self.kind == "mode":
            return f"{self.path} is mode {self.mode:04o}"
        return f"{self.path} is {self.kind}"


def exposure(path: Path) -> Exposure | None:
    """What makes ``path`` not a private file; None when it is a regular file only its owner
    may access, or does not exist. Changes nothing."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return None
    mode = stat.S_IMODE(found.st_mode)
    if stat.S_ISLNK(found.st_mode):
        return Exposure(path, mode, "link", _link_target(path))
    if not stat.S_ISREG(found.st_mode):
        return Exposure(path, mode, "not a regular file")
    return Exposure(path, mode, "mode") if mode & 0o077 else None


_MODES_LEFT_ALONE: ContextVar[bool] = ContextVar("modes_left_alone", default=False)


@contextmanager
def modes_left_alone() -> Iterator[None]:
    """Within it, ``secure_existing_files`` leaves a file open to others as it is (a link is
    still refused): what only inspects a deployment (``hubsync doctor``, which reports such a
    mode itself) changes nothing it looks at."""
    token = _MODES_LEFT_ALONE.set(True)
    try:
        yield
    finally:
        _MODES_LEFT_ALONE.reset(token)


def secure_existing_files(paths: Iterable[Path]) -> None:
    """Refuse a link or a non-regular file among ``paths``; tighten a regular one group or
    others may access (logged; not within ``modes_left_alone``), or refuse it when this user
    may not. Missing ones are skipped. Raises ``UnsafeFileError``."""
    for path in paths:
        found = exposure(path)
        if found is None:
            continue
        if found.kind != "mode":
            raise UnsafeFileError(
                f"{found}: hubsync opens its private files only as regular files, never "
                "through a link; put the file itself in its place, or move it aside"
            )
        if not _MODES_LEFT_ALONE.get():
            _tighten(path)


def _tighten(path: Path) -> None:
    try:
        fd = os.open(path, _OPEN_NO_LINK)
    except FileNotFoundError:
        return  # gone meanwhile (a -wal at checkpoint)
    except OSError as exc:  # ELOOP: a link since it was looked at; EACCES: no owner read bit
        raise UnsafeFileError(
            f"{path} is open to group or others, and this user cannot open it to tighten it "
            f"({exc.strerror}); run chmod 600 on it as its owner"
        ) from None
    try:
        found = os.fstat(fd)
        mode = stat.S_IMODE(found.st_mode)
        if not stat.S_ISREG(found.st_mode):
            raise UnsafeFileError(f"{path} is not a regular file; put the file itself there")
        try:
            os.fchmod(fd, mode & ~0o077)
        except PermissionError:
            raise UnsafeFileError(
                f"{path} is mode {mode:04o}, so group or others may read it, and belongs to "
                f"uid {found.st_uid}, not to this user (uid {os.geteuid()}), who cannot tighten "
                "it; run chmod 600 on it as its owner"
            ) from None
    finally:
        os.close(fd)
    log.warning(
        "%s was mode %04o (group or others could read it); tightened it to %04o",
        path,
        mode,
        mode & ~0o077,
    )


def _link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"
