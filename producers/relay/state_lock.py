"""One relay per state dir: an OS lock on ``<state_dir>/relay.lock`` for the relay's life.

Two relays on one state dir would both send every row (and both apply acks).
The lock is ``flock`` on a file in the state dir, taken without waiting when
the relay starts: the kernel drops it when the holder exits, however it exits
(``kill -9`` included), so a crashed relay never leaves a stale lock behind and
the next one starts at once. The file keeps the holder's pid and host, for the
refusal to name; it is never deleted (removing a lock file while another
process opens it would let two holders lock two different files).
``relay --check`` only reads Redis and never takes it.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from hubsync.core.closing import ClosesOnExit
from hubsync.core.sqlite import PRIVATE_FILE_MODE
from producers.errors import RelayAlreadyRunningError, StateDirAccessError

LOCK_FILE = "relay.lock"
"""The file in the state dir the running relay holds locked."""

_HOLDER_BYTES = 256  # "<pid> <host>" and a newline: far less


class StateDirLock(ClosesOnExit):
    """The exclusive hold of one relay on its state dir, until ``close`` or the process ends."""

    def __init__(self, state_dir: Path) -> None:
        """Take the lock, or raise ``RelayAlreadyRunningError`` naming the relay that holds it."""
        self.path = state_dir / LOCK_FILE
        try:
            # O_NOFOLLOW: a link in its place is refused, never a file made where it points
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(self.path, flags, PRIVATE_FILE_MODE)
        except OSError as exc:
            raise StateDirAccessError(
                f"cannot open the relay's lock file {self.path} ({exc.strerror}); the relay "
                f"needs to write its state dir {state_dir}: check its permissions"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise RelayAlreadyRunningError(
                f"another relay ({holder}) already runs on the state dir {state_dir} (it holds "
                f"{self.path}); two would send every event twice. Stop that one first, or "
                "ask it how it is: hubsync relay --check"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        # ours now: say who holds it (a reader in between sees an empty file: "pid unknown")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        self._fd: int | None = fd

    def close(self) -> None:
        """Let go of the lock (idempotent); the file stays for the next relay."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the only descriptor releases the flock


def _holder(fd: int) -> str:
    """``pid N on host H`` from the lock file, as far as the holder wrote it."""
    pid, _, host = os.pread(fd, _HOLDER_BYTES, 0).decode(errors="replace").strip().partition(" ")
    if not pid.isdigit():
        return "pid unknown"
    return f"pid {pid} on host {host}" if host else f"pid {pid}"
