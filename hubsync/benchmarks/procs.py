"""Processes and facts the benchmarks need: child processes, peak RSS, a private NATS, the machine.

Nothing here touches a server the machine already runs: Redis and NATS are
private children on free loopback ports, in temporary directories.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from hubsync.embedded_redis import free_port
from hubsync.errors import HubsyncError


class BenchError(HubsyncError):
    """A benchmark could not run (a child failed, a server did not start, a count is wrong)."""


def hubsync_process(
    args: Sequence[str], log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``hubsync ARGS`` as a child process (this interpreter), its output appended to ``log``."""
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("HUBSYNC_")}
    child_env.update(env or {})
    with log.open("ab") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "hubsync.cli.main", *args],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=child_env,
        )


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 15.0) -> int:
    """SIGTERM, wait, then SIGKILL if needed; the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return int(proc.returncode)


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set so far (``VmHWM``), in MiB; 0 when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used so far; 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    # After the command name: state is field 3, utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def redis_cpu_seconds(client: Any) -> float:
    """User + system CPU seconds the redis-server has used (``INFO cpu``)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def wait_for(
    condition: Callable[[], object], timeout: float, what: str, every: float = 0.01
) -> None:
    """Poll ``condition`` until truthy; ``BenchError`` naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def percentiles(
    values: Sequence[float], points: Sequence[float] = (0.5, 0.95, 0.99)
) -> dict[str, float]:
    """``{"p50": ..., "p95": ..., "p99": ...}`` of ``values`` (nearest rank), rounded."""
    ordered = sorted(values)
    out: dict[str, float] = {}
    for point in points:
        if not ordered:
            out[f"p{round(point * 100)}"] = 0.0
            continue
        rank = min(len(ordered) - 1, max(0, int(point * len(ordered) + 0.5) - 1))
        out[f"p{round(point * 100)}"] = round(ordered[rank], 3)
    return out


class NatsServer:
    """A private ``nats-server -js`` on a free port with its store in a temp directory."""

    def __init__(self, directory: Path) -> None:
        binary = shutil.which("nats-server")
        if binary is None:
            raise BenchError("nats-server is not installed")
        self.binary = binary
        self.directory = directory
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:<port>``."""
        return f"nats://127.0.0.1:{self.port}"

    def __enter__(self) -> NatsServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        log = (self.directory / "nats.log").open("ab")
        self.proc = subprocess.Popen(
            [
                self.binary,
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-sd",
                str(self.directory),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        import socket

        def listening() -> bool:
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", self.port)) == 0

        wait_for(listening, 10, "nats-server to listen")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            stop_process(self.proc)


@contextlib.contextmanager
def children_stopped(
    procs: list[subprocess.Popen[bytes]],
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Yield ``procs``; whatever happens, stop every one of them afterwards."""
    try:
        yield procs
    finally:
        for proc in procs:
            stop_process(proc)


def _version(args: list[str]) -> str:
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "not installed"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else "?"


def machine() -> dict[str, object]:
    """What the figures were measured on."""
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory_gb = 0.0
    with contextlib.suppress(OSError, ValueError, IndexError):
        first = Path("/proc/meminfo").read_text().splitlines()[0]
        memory_gb = round(int(first.split()[1]) / 1024 / 1024, 1)
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_gb": memory_gb,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "redis_server": _version(["redis-server", "--version"]),
        "nats_server": _version(["nats-server", "--version"]),
    }
