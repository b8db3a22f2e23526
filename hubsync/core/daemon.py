"""The skeleton every hubsync daemon runs on: how it stops, rides out Redis, paces and reports.

``Daemon`` (the relay and the hub consumer both are one) gives:

* a stop event and ``request_stop`` (finish the current batch, then return) and
  ``request_force_stop`` (exit at once with 128 + the signal's number: work in
  flight stays pending, never lost), as rq's workers have;
* ``stop_signals()``: while inside, the first SIGTERM or SIGINT asks for the
  warm stop and a second one forces it. Only here are signal handlers
  installed (``swap_signal_handlers``); a daemon built with
  ``handle_signals=False``, or run off the main thread, leaves the embedding
  program's handlers alone (as arq's ``Worker(handle_signals=False)``);
* ``RedisOutages``: Redis's up/down state as the daemon's threads see it, one
  log line when it goes and one when it comes back, never a line per retry;
* ``Periodic``: a task due every N seconds on an injected monotonic clock;
* ``HealthKey``: the key a live daemon keeps fresh with a TTL, deleted on a clean stop;
* ``Readiness``: what ``/readyz`` answers: the loop's heartbeat (stalled once it
  is ``stale_after`` seconds old on the injected clock) and the conditions the
  work needs (Redis reachable; a hub consumer's store too). Not ready before the
  loop's first pass, nor once a stop was asked; the answer names what fails;
* ``log_summary``: the one line at shutdown, its figures also as fields of a JSON log record.

Each daemon's own work (sending, acks, pruning; reading, judging, ingesting,
reclaiming) stays in its own module: the skeleton only runs it.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import FrameType
from typing import TypeVar

from hubsync.core.connections import UNAVAILABLE_ERRORS, RedisClient

log = logging.getLogger(__name__)

MonotonicClock = Callable[[], float]
"""Seconds that only move forward: ``time.monotonic`` in production, a fake in tests."""
SignalHandler = Callable[[int, FrameType | None], None]

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)
"""What stops a daemon: the first warm, a second at once."""

T = TypeVar("T")


def swap_signal_handlers(
    signals: Iterable[signal.Signals], handler: SignalHandler
) -> Callable[[], None]:
    """Handle ``signals`` with ``handler``; returns what puts the previous handlers back.

    The one place hubsync installs signal handlers (the main thread only, as Python requires).
    """
    previous = {sig: signal.getsignal(sig) for sig in signals}
    for sig in previous:
        signal.signal(sig, handler)

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore


class Daemon:
    """A long-running loop that stops warm on request, or at once when asked twice."""

    def __init__(
        self,
        label: str,
        *,
        handle_signals: bool = True,
        monotonic: MonotonicClock = time.monotonic,
        heartbeat_timeout: float = 30.0,
    ) -> None:
        """``heartbeat_timeout``: seconds without a loop pass after which it is not ready."""
        self.label = label
        """How log lines name this daemon (``relay <runtime>``, ``consumer <name>``)."""
        self.handle_signals = handle_signals
        self.monotonic = monotonic
        self.stop_event = threading.Event()
        self.started_at = monotonic()
        self.readiness = Readiness(heartbeat_timeout, monotonic)
        """What ``/readyz`` answers: the loop ``beat``s it; each daemon adds its conditions."""
        self.readiness.require("stopping", lambda: not self.stopping)
        self._signals_seen = itertools.count(1)
        self._restore_signals: Callable[[], None] | None = None

    # -- stopping ------------------------------------------------------------

    def request_stop(self) -> None:
        """Finish the current batch, then stop (what the first SIGTERM or SIGINT does)."""
        self.stop_event.set()

    def request_force_stop(self, signum: int = signal.SIGTERM) -> None:
        """Exit now with 128 + ``signum`` (a second signal): what was not acknowledged
        stays pending, to be sent or read again."""
        os.write(2, f"{self.label}: second signal, exiting now\n".encode())
        os._exit(128 + signum)

    @property
    def stopping(self) -> bool:
        """Whether a stop was requested."""
        return self.stop_event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, woken by a stop request; whether one was made."""
        return self.stop_event.wait(seconds)

    def elapsed(self) -> float:
        """Seconds since the daemon was made."""
        return self.monotonic() - self.started_at

    @contextlib.contextmanager
    def stop_signals(self) -> Iterator[None]:
        """While inside, SIGTERM and SIGINT stop this daemon (the previous handlers return
        on the way out). Nothing is installed with ``handle_signals=False``, off the main
        thread, or when an outer ``stop_signals`` of this daemon already did."""
        if (
            not self.handle_signals
            or self._restore_signals is not None
            or threading.current_thread() is not threading.main_thread()
        ):
            yield
            return
        self._restore_signals = swap_signal_handlers(STOP_SIGNALS, self._on_signal)
        try:
            yield
        finally:
            restore, self._restore_signals = self._restore_signals, None
            restore()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Counted first (one C call, so atomic): a second signal can run its handler inside
        # this one, at any bytecode, and must find this one counted.
        if next(self._signals_seen) > 1:
            self.request_force_stop(signum)
            return
        self.request_stop()
        log.info(
            "%s: received %s; finishing the current batch, then exiting",
            self.label,
            signal.Signals(signum).name,
        )

    # -- the summary ---------------------------------------------------------

    def log_summary(self, line: str, fields: Mapping[str, object]) -> None:
        """Log the one-line summary; a JSON log record carries ``fields`` as ``summary``."""
        log.info("%s", line, extra={"daemon": self.label, "summary": dict(fields)})


class Readiness:
    """A daemon's loop heartbeat and the conditions its work needs."""

    def __init__(self, stale_after: float, monotonic: MonotonicClock = time.monotonic) -> None:
        self.stale_after = stale_after
        """Seconds without a ``beat`` after which the loop counts as stalled."""
        self._monotonic = monotonic
        self._last_beat: float | None = None
        self._conditions: list[tuple[str, Callable[[], bool]]] = []
        self._lock = threading.Lock()

    def require(self, problem: str, holds: Callable[[], bool]) -> Readiness:
        """Not ready while ``holds()`` is false, which the answer calls ``problem``
        (``"Redis unreachable"``); returns self."""
        with self._lock:
            self._conditions.append((problem, holds))
        return self

    def beat(self) -> None:
        """The loop made one more pass (called once per pass, by the loop itself)."""
        self._last_beat = self._monotonic()

    def problems(self) -> list[str]:
        """Why the daemon is not ready now; empty when it is."""
        found = []
        if self._last_beat is None:
            found.append("loop not started")
        else:
            silent = self._monotonic() - self._last_beat
            if silent > self.stale_after:
                found.append(f"loop stalled: no pass for {silent:.0f}s")
        with self._lock:
            conditions = list(self._conditions)
        found.extend(problem for problem, holds in conditions if not holds())
        return found

    @property
    def ready(self) -> bool:
        """Whether the daemon is ready now."""
        return not self.problems()


class RedisOutages:
    """Redis's up/down state as a daemon's threads see it; logs each change once.

    ``down`` and ``up`` are the two lines (after ``<label>: ``); ``down`` may name
    ``{error}`` (the exception's type), ``up`` ``{seconds}`` (how long Redis was gone).
    """

    def __init__(
        self,
        label: str,
        *,
        down: str = "Redis unreachable ({error}); retrying with backoff",
        up: str = "Redis reachable again after {seconds:.1f}s",
        monotonic: MonotonicClock = time.monotonic,
    ) -> None:
        self.label = label
        self._lines = (down, up)  # logged as Redis goes, and as it comes back
        self._monotonic = monotonic
        self._up, self._since = True, 0.0
        self._lock = threading.Lock()
        self.count = 0
        """How many times Redis went away."""

    @property
    def up(self) -> bool:
        """Whether the last operation against Redis succeeded."""
        return self._up

    def failed(self, exc: BaseException) -> None:
        """Note a failed operation; logs only when Redis was believed up."""
        with self._lock:
            if not self._up:
                return
            self._up = False
            self._since = self._monotonic()
            self.count += 1
        log.warning("%s: %s", self.label, self._lines[0].format(error=type(exc).__name__))

    def succeeded(self) -> None:
        """Note a successful operation; logs only when Redis was believed down."""
        if self._up:
            return
        with self._lock:
            if self._up:
                return
            self._up = True
            seconds = self._monotonic() - self._since
        log.info("%s: %s", self.label, self._lines[1].format(seconds=seconds))


class Periodic:
    """A task due every ``interval`` seconds on ``monotonic``: due at once, then an interval
    after each run that returned (one that raised stays due)."""

    def __init__(self, interval: float, monotonic: MonotonicClock = time.monotonic) -> None:
        self.interval = interval
        self._monotonic = monotonic
        self._next = float("-inf")

    def due(self) -> bool:
        """Whether the task is due now."""
        return self._monotonic() >= self._next

    def run(self, task: Callable[[], T]) -> T | None:
        """Run ``task`` if due (its result), else None."""
        now = self._monotonic()
        if now < self._next:
            return None
        result = task()
        self._next = now + self.interval
        return result

    def reset(self) -> None:
        """Make the task due at once."""
        self._next = float("-inf")


class HealthKey:
    """The key a live daemon refreshes with a TTL: gone within ``ttl`` of its last refresh,
    at once after a clean stop."""

    def __init__(self, key: str, ttl: float) -> None:
        self.key = key
        self.ttl = ttl

    @property
    def ttl_ms(self) -> int:
        """The TTL in milliseconds, at least 1."""
        return max(1, int(self.ttl * 1000))

    def write(self, client: RedisClient, record: str) -> None:
        """Refresh the key with ``record`` (JSON) for ``ttl`` seconds."""
        client.set(self.key, record, px=self.ttl_ms)

    def clear(
        self,
        client: RedisClient,
        ignore: tuple[type[BaseException], ...] = UNAVAILABLE_ERRORS,
    ) -> None:
        """Delete the key (a clean stop says so at once); an ``ignore`` error (by default,
        Redis unreachable) is let be: the TTL removes the key then."""
        with contextlib.suppress(*ignore):
            client.delete(self.key)
