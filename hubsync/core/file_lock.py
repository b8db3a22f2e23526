"""``FileLock``: an exclusive OS lock on a file, taken without waiting, held until released.

The lock is ``flock`` on a file opened without following a link (``O_NOFOLLOW``):
the kernel drops it when the holder exits, however it exits (``kill -9``
included), so a crashed holder never leaves a stale lock behind. The file keeps
the holder's pid and host, for a refusal to name; it is never deleted (removing
a lock file while another process opens it would let two holders lock two
different files). One process per lock: two opens of the file in one process
exclude each other too.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from hubsync.core.errors import HubsyncError
from hubsync.core.sqlite import PRIVATE_FILE_MODE

_HOLDER_BYTES = 256  # "<pid> <host>" and a newline: far less


class FileLockHeldError(HubsyncError):
    """Another open of the file holds the lock; ``holder`` names it as far as it wrote itself."""

    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(f"{path} is locked by {holder}")
        self.holder = holder


class FileLock:
    """The exclusive hold of ``path`` (created ``mode`` if missing), until ``close``.

    Raises ``FileLockHeldError`` when another holder has it, and ``OSError`` when the
    file cannot be opened (a link in its place, no permission).
    """

    def __init__(self, path: Path, mode: int = PRIVATE_FILE_MODE) -> None:
        self.path = path
        # O_NOFOLLOW: a link in its place is refused, never a file made where it points
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise FileLockHeldError(path, holder) from None
        except BaseException:
            os.close(fd)
            raise
        # ours now: say who holds it (a reader in between sees an empty file: "pid unknown")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        self._fd: int | None = fd

    def close(self) -> None:
        """Let go of the lock (idempotent); the file stays for the next holder."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the only descriptor releases the flock


def _holder(fd: int) -> str:
    """``pid N on host H`` from the lock file, as far as the holder wrote it."""
    pid, _, host = os.pread(fd, _HOLDER_BYTES, 0).decode(errors="replace").strip().partition(" ")
    if not pid.isdigit():
        return "pid unknown"
    return f"pid {pid} on host {host}" if host else f"pid {pid}"
