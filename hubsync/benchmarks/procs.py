"""Facts the benchmarks need: peak RSS, CPU time, percentiles, a private NATS, the machine.

Nothing here touches a server the machine already runs: Redis and NATS are
private children on free loopback ports, in temporary directories.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hubsync.core.errors import HubsyncError
from hubsync.demo.embedded_redis import free_port
from hubsync.processes import Child


class BenchError(HubsyncError):
    """A benchmark could not run (a child failed, a server did not start, a count is wrong)."""


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
    fields = _stat_fields(Path(f"/proc/{pid}/stat"))
    return 0.0 if fields is None else _own_ticks(fields) / os.sysconf("SC_CLK_TCK")


def _stat_fields(stat: Path) -> list[str] | None:
    """The fields of a ``/proc/<pid>/stat`` after the command name (from the state, field
    3, on); None when the process is gone."""
    try:
        return stat.read_text().rpartition(")")[2].split()
    except OSError:
        return None


def _own_ticks(fields: list[str]) -> int:
    """utime + stime (fields 14 and 15) of ``_stat_fields``' list."""
    return int(fields[11]) + int(fields[12])


def process_tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid``, its live children and the children it has reaped (a server
    such as PostgreSQL, whose work is done by the backends its postmaster forks); 0 when
    it is gone."""
    fields = _stat_fields(Path(f"/proc/{pid}/stat"))
    if fields is None:
        return 0.0
    # utime, stime, cutime, cstime are fields 14 to 17 (waited-for children in the last two)
    ticks = sum(int(value) for value in fields[11:15])
    for stat in Path("/proc").glob("[0-9]*/stat"):
        child = _stat_fields(stat)
        # gone meanwhile: its time is in its parent's cutime once reaped
        if child is not None and int(child[1]) == pid:  # field 4: the parent's pid
            ticks += _own_ticks(child)
    return ticks / os.sysconf("SC_CLK_TCK")


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
        self.child: Child | None = None

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:<port>``."""
        return f"nats://127.0.0.1:{self.port}"

    def __enter__(self) -> NatsServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        argv = [
            self.binary,
            "-js",
            "-a",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-sd",
            str(self.directory),
        ]
        self.child = Child("nats-server", argv, self.directory / "nats.log").start()
        import socket

        def listening() -> bool:
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", self.port)) == 0

        wait_for(listening, 10, "nats-server to listen")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.child is not None:
            self.child.stop(timeout=15)


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
