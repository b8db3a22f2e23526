"""When one project's event store cannot be read, and how to say why in one line.

A store can be unreadable while every other project of the runtime is fine: a
file of another schema version, one that is not a database (corrupt, truncated,
overwritten), a directory where the file should be, a permission or disk error,
a file bound to another project, one locked past its busy budget, or a symbolic link
in its place. The relay
and ``hubsync status`` treat each of these as the state of that one project,
never as an error of the runtime.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hubsync.core.errors import (
    HubsyncError,
    SchemaVersionError,
    StoreBusyError,
    UnsafeFileError,
)
from producers.errors import RebindError

UNREADABLE_STORE_ERRORS: tuple[type[BaseException], ...] = (
    SchemaVersionError,
    RebindError,
    StoreBusyError,
    UnsafeFileError,  # a link in the file's place, or another user's file open to others
    sqlite3.DatabaseError,  # also OperationalError: "unable to open", "disk I/O error"
    OSError,  # a permission error, a directory in the file's place
)
"""What opening or reading one project's store raises when that store, not the runtime, is bad."""


def unreadable_reason(exc: BaseException, path: Path) -> str:
    """One line naming the store file, what is wrong with it and, if ours does not say, what to do."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if str(path) not in text:
        text = f"{path}: {text}"
    if not isinstance(exc, HubsyncError):
        # hubsync's own errors say what to do; SQLite's and the OS's do not
        text += " (restore the file from a backup, or move it aside to start afresh)"
    return text
