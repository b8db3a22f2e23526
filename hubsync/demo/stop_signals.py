"""How ``hubsync demo`` stops on a signal: every ``finally`` runs, so nothing is left behind.

SIGINT (Ctrl-C), SIGTERM (``timeout``, ``kill``, a CI cancel) and SIGHUP (a closed
terminal) each raise ``Stopped`` in the main thread; the demo then kills its daemons, stops
its private Redis, removes its files and exits 128 + the signal's number. The daemons it
starts are processes of their own, with their own handlers.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType

from hubsync.core.daemon import swap_signal_handlers

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Ctrl-C, what ``timeout``, ``kill`` and a CI cancel send, and a closed terminal: each stops
the demo, cleans up and exits 128 + the signal's number."""


class Stopped(BaseException):
    """A stop signal arrived: raised in the main thread so every ``finally`` runs on the way out.

    A BaseException, as KeyboardInterrupt is, so no ``except Exception`` swallows it.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StopSignals:
    """While inside, the first of ``STOP_SIGNALS`` raises ``Stopped`` in the main thread.

    Later signals are only recorded, as are any during ``shield()`` (the
    cleanup): an exception raised half-way through a cleanup would leave what
    it had not reached yet. The previous handlers come back on the way out.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self._restore: Callable[[], None] | None = None

    def __enter__(self) -> StopSignals:
        self._install(self._stop)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._restore is not None:
            self._restore()

    def shield(self) -> None:
        """From now on a stop signal is recorded (``received``), not raised."""
        self._install(self._record)

    def _install(self, handler: Callable[[int, FrameType | None], None]) -> None:
        restore = swap_signal_handlers(STOP_SIGNALS, handler)
        if self._restore is None:  # the handlers from before the demo, put back on the way out
            self._restore = restore

    def _record(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        self.shield()
        self._record(signum, frame)
        raise Stopped(signum)
