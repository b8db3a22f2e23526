"""One relay per state dir: an OS lock on ``<state_dir>/relay.lock`` for the relay's life.

Two relays on one state dir would both send every row (and both apply acks).
The lock is a ``hubsync.core.file_lock.FileLock`` on a file in the state dir,
taken without waiting when the relay starts: the kernel drops it when the
holder exits, however it exits (``kill -9`` included), so a crashed relay never
leaves a stale lock behind and the next one starts at once. The file keeps the
holder's pid and host, for the refusal to name.
``relay --check`` only reads Redis and never takes it.
"""

from __future__ import annotations

from pathlib import Path

from hubsync.core.closing import ClosesOnExit
from hubsync.core.file_lock import FileLock, FileLockHeldError
from producers.errors import RelayAlreadyRunningError, StateDirAccessError

LOCK_FILE = "relay.lock"
"""The file in the state dir the running relay holds locked."""


class StateDirLock(ClosesOnExit):
    """The exclusive hold of one relay on its state dir, until ``close`` or the process ends."""

    def __init__(self, state_dir: Path) -> None:
        """Take the lock, or raise ``RelayAlreadyRunningError`` naming the relay that holds it."""
        self.path = state_dir / LOCK_FILE
        try:
            self._lock = FileLock(self.path)
        except FileLockHeldError as exc:
            raise RelayAlreadyRunningError(
                f"another relay ({exc.holder}) already runs on the state dir {state_dir} (it "
                f"holds {self.path}); two would send every event twice. Stop that one first, "
                "or ask it how it is: hubsync relay --check"
            ) from None
        except OSError as exc:
            raise StateDirAccessError(
                f"cannot open the relay's lock file {self.path} ({exc.strerror}); the relay "
                f"needs to write its state dir {state_dir}: check its permissions"
            ) from exc

    def close(self) -> None:
        """Let go of the lock (idempotent); the file stays for the next relay."""
        self._lock.close()
