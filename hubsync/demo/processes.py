"""hubsync daemons as real child processes, so the demo can kill them as a crash would."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path


class Daemon:
    """One ``hubsync <command>`` child process with its stderr in a log file."""

    def __init__(
        self, name: str, args: list[str], log_dir: Path, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self.out_path = log_dir / f"{name}.out"
        self._terminated = False
        # settings come as arguments or in ``env`` (a URL with a password stays off
        # the command line, where ps would show it), never from the caller's HUBSYNC_*
        child_env = {k: v for k, v in os.environ.items() if not k.startswith("HUBSYNC_")}
        child_env.update(env or {})
        with self.log_path.open("wb") as err, self.out_path.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "hubsync.cli.main", *args],
                stdout=out,
                stderr=err,
                env=child_env,
                start_new_session=True,  # a Ctrl-C at the terminal is the demo's to handle
            )

    @property
    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.process.poll() is None

    def kill(self) -> None:
        """kill -9, as a crash would."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def terminate(self) -> None:
        """Send one SIGTERM: finish the batch, exit with a summary (a second would cut it short)."""
        if self.alive and not self._terminated:
            self._terminated = True
            self.process.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 30.0) -> int:
        """``terminate``, then wait; kill if it does not exit in time."""
        self.terminate()
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return -9

    def output(self) -> str:
        """What the process printed on stdout."""
        return self.out_path.read_text(errors="replace")

    def log(self) -> str:
        """What the process logged on stderr."""
        return self.log_path.read_text(errors="replace")
