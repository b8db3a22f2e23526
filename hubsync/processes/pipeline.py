"""A live pipeline as child processes: ``hubsync relay`` per state dir, ``hubsync consume`` per name.

The caller brings the Redis (a private server, or the one it was given) and the
state dirs / hub database; this starts the daemons against it, watches that
none dies, and stops or kills them all at the end. The Redis URL reaches the
children through ``HUBSYNC_REDIS_URL``, so a password never shows on a command line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from hubsync.core.errors import HubsyncError
from hubsync.processes.child import Child, hubsync_command

T = TypeVar("T")


class PipelineTimeout(HubsyncError):
    """The pipeline did not reach a condition in time (every child was still running)."""


def poll_until(
    condition: Callable[[], T],
    timeout: float,
    interval: float,
    timed_out: Callable[[], Exception],
    before: Callable[[], None] | None = None,
) -> T:
    """Call ``condition`` every ``interval`` seconds until it returns a truthy value, and
    return that; raise ``timed_out()`` once ``timeout`` seconds have passed. ``before`` runs
    ahead of each call (and may raise to end the wait)."""
    deadline = time.monotonic() + timeout
    while True:
        if before is not None:
            before()
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise timed_out()
        time.sleep(interval)


class PipelineProcesses:
    """Relays, hub consumers and any helper processes of one pipeline, by name."""

    def __init__(self, redis_url: str, log_dir: Path, env: Mapping[str, str] | None = None) -> None:
        self.redis_url = redis_url
        self.log_dir = log_dir
        self.env = {**(env or {}), "HUBSYNC_REDIS_URL": redis_url}
        self.children: dict[str, Child] = {}
        log_dir.mkdir(parents=True, exist_ok=True)

    def __enter__(self) -> PipelineProcesses:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.kill_all()

    def __iter__(self) -> Iterator[Child]:
        return iter(self.children.values())

    def __getitem__(self, name: str) -> Child:
        return self.children[name]

    def start(
        self,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        separate_stdout: bool = False,
    ) -> Child:
        """Start ``argv`` as child ``name``, its log ``<log_dir>/<name>.log``."""
        if name in self.children:
            raise HubsyncError(f"a child named {name} already exists in this pipeline")
        child = Child(
            name,
            argv,
            self.log_dir / f"{name}.log",
            env={**self.env, **(env or {})},
            stdout=self.log_dir / f"{name}.out" if separate_stdout else None,
        )
        self.children[name] = child
        return child.start()

    def relay(
        self, name: str, state_dir: Path, *extra: str, separate_stdout: bool = False
    ) -> Child:
        """Start ``hubsync relay --state-dir STATE_DIR EXTRA`` as child ``name``."""
        argv = hubsync_command("relay", "--state-dir", str(state_dir), *extra)
        return self.start(name, argv, separate_stdout=separate_stdout)

    def consumer(
        self, name: str, hub_db: Path, *extra: str, separate_stdout: bool = False
    ) -> Child:
        """Start ``hubsync consume --hub-db HUB_DB --name NAME EXTRA`` as child ``name``."""
        argv = hubsync_command("consume", "--hub-db", str(hub_db), "--name", name, *extra)
        return self.start(name, argv, separate_stdout=separate_stdout)

    def check(self) -> None:
        """Raise ``ChildDied`` for the first child that exited without being told to."""
        for child in self.children.values():
            child.check()

    def wait_until(
        self, condition: Callable[[], T], timeout: float, what: str, interval: float = 0.05
    ) -> T:
        """Poll ``condition`` until truthy (its value); ``ChildDied`` at once if a child dies."""
        return poll_until(
            condition,
            timeout,
            interval,
            lambda: PipelineTimeout(f"timed out after {timeout:.0f}s waiting for {what}"),
            before=self.check,
        )

    def stop_all(self, timeout: float = 30.0) -> dict[str, int | None]:
        """SIGTERM every child at once, then wait for each (SIGKILL at ``timeout``); exit codes."""
        for child in self.children.values():
            child.terminate()
        return {name: child.stop(timeout) for name, child in self.children.items()}

    def kill_all(self) -> None:
        """kill -9 whatever still runs (a failed run leaves nothing behind)."""
        for child in self.children.values():
            if child.alive:
                child.kill()
