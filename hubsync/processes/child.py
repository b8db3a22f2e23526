"""The one way to start a child process: a clean environment, a log file, stop, kill, pause.

Children run this interpreter with ``-P``: Python then puts neither the current
directory nor a script's directory first on ``sys.path``, so a ``hubsync/``
folder where the command was started (a clone, or its parent) cannot hide the
installed package and make every child die on import.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from hubsync.core.errors import HubsyncError

SCRUBBED_PREFIX = "HUBSYNC_"
SCRUBBED_NAMES = ("REDIS_URL",)
TAIL_LINES = 15
"""How many last log lines a ``ChildDied`` message carries."""


def python_command(module: str, *args: str) -> list[str]:
    """``python -P -m MODULE ARGS`` with this interpreter (the cwd stays off ``sys.path``)."""
    return [sys.executable, "-P", "-m", module, *args]


def hubsync_command(*args: str) -> list[str]:
    """``hubsync ARGS`` as a command line that works from any current directory."""
    return python_command("hubsync", *args)


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without ``HUBSYNC_*`` and ``REDIS_URL``, then ``extra``.

    A child's settings come from its arguments or ``extra`` only (a URL with a
    password goes in ``extra``, off the command line where ps would show it),
    never from whatever the caller's shell happened to export.
    """
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(SCRUBBED_PREFIX) and name not in SCRUBBED_NAMES
    }
    env.update(extra or {})
    return env


def run_hubsync(
    args: Sequence[str],
    env: Mapping[str, str] | None = None,
    timeout: float = 120.0,
    cwd: Path | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``hubsync ARGS`` to completion in a clean environment; its text output captured.

    ``stdin``: the text fed to it; without it, the child reads the caller's stdin.
    """
    return subprocess.run(
        hubsync_command(*args),
        input=stdin,
        capture_output=True,
        text=True,
        env=child_environment(env),
        timeout=timeout,
        cwd=cwd,
        check=False,
    )


class ChildDied(HubsyncError):
    """A child process exited while it was meant to run; names it, its exit code, its last lines."""

    def __init__(self, name: str, code: int | None, tail: str, log: Path) -> None:
        shown = tail.rstrip() or "(its log is empty)"
        super().__init__(
            f"{name} exited with code {code} while it should be running; "
            f"the end of its log ({log}):\n{shown}"
        )
        self.name = name
        self.code = code
        self.tail = tail


class Child:
    """One child process by name: its output appended to ``log``, stopped, killed or paused.

    ``stdout``, when given, receives the standard output apart from the log
    (the demo reads a daemon's JSON summary there). A child stopped or killed on
    purpose is not reported dead by ``check``; ``restart`` starts it again.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log: Path,
        env: Mapping[str, str] | None = None,
        stdout: Path | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log
        self.stdout = stdout
        self.env = child_environment(env)
        self.cwd = cwd
        self.process: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.starts = 0
        self._ended_on_purpose = False

    def start(self) -> Child:
        """Start (or start again after it ended); the log is appended to, never truncated."""
        if self.alive:
            raise HubsyncError(f"{self.name} is already running (pid {self.pid})")
        with contextlib.ExitStack() as files:  # the child keeps its own descriptors
            log = files.enter_context(self.log.open("ab"))
            out = files.enter_context(self.stdout.open("ab")) if self.stdout else log
            self.process = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=log,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,  # a Ctrl-C at the terminal is the parent's to handle
            )
        self.paused = False
        self._ended_on_purpose = False
        self.starts += 1
        return self

    def restart(self, timeout: float = 20.0) -> Child:
        """Stop it if it runs, then start it again."""
        self.stop(timeout)
        return self.start()

    @property
    def pid(self) -> int:
        """The process id of the current run."""
        return self._running_process().pid

    @property
    def alive(self) -> bool:
        """Started and not exited."""
        return self.process is not None and self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        """The exit code, or None while it runs (or before it started)."""
        return None if self.process is None else self.process.poll()

    def signal(self, signum: int) -> None:
        """Send ``signum`` if the process still runs (a reaped pid may belong to another)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signum)

    def terminate(self) -> None:
        """One SIGTERM (after SIGCONT if paused): the daemon finishes its batch and exits.

        Only one per run: a second SIGTERM tells a hubsync daemon to exit at once.
        """
        if self.alive and not self._ended_on_purpose:
            self._ended_on_purpose = True
            self.resume()
            self.signal(signal.SIGTERM)

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit; its code (``subprocess.TimeoutExpired`` at the deadline)."""
        return self._running_process().wait(timeout=timeout)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL; the exit code."""
        if self.process is None:
            return None
        self.terminate()
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.process.returncode

    def kill(self) -> None:
        """kill -9, as a crash would (a paused process dies too), and reap it."""
        if self.process is None:
            return
        self._ended_on_purpose = True
        self.signal(signal.SIGKILL)
        self.process.wait()
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP: it keeps whatever it holds and does nothing."""
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT after ``pause``."""
        if self.paused:
            self.signal(signal.SIGCONT)
            self.paused = False

    def check(self) -> None:
        """Raise ``ChildDied`` if it exited without being stopped or killed on purpose."""
        if self.process is None or self._ended_on_purpose:
            return
        code = self.process.poll()
        if code is not None:
            raise ChildDied(self.name, code, self.tail(), self.log)

    def log_text(self) -> str:
        """Everything it logged so far."""
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, lines: int = TAIL_LINES) -> str:
        """The last ``lines`` lines of its log."""
        return "\n".join(self.log_text().splitlines()[-lines:])

    def output(self) -> str:
        """What it printed on stdout (when kept apart from the log)."""
        if self.stdout is None:
            return self.log_text()
        return self.stdout.read_text(errors="replace")

    def _running_process(self) -> subprocess.Popen[bytes]:
        if self.process is None:
            raise HubsyncError(f"{self.name} was never started")
        return self.process
