"""``/readyz`` of real daemons follows what their work needs, while ``/healthz`` stays 200.

A relay and a consumer (real processes, ``--metrics-port``) on a private Redis
that is stopped and started again: both answer 503 naming Redis while it is
down and 200 once it is back. (A hub store that goes away:
``tests/consumers/test_consumer_readiness.py``.)
"""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from pathlib import Path

from hubsync.demo.embedded_redis import RedisServerProcess
from hubsync.processes import PipelineProcesses
from tests.helpers.relay_support import make_runtime


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def get(port: int, path: str) -> tuple[int, str] | None:
    """Status and body of ``GET path`` on a metrics port; None while nothing listens."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as refused:
        with refused:
            return refused.code, refused.read().decode()
    except OSError:
        return None


def answers(port: int, status: int, *words: str) -> bool:
    """Whether ``/readyz`` answers ``status`` with a body naming every one of ``words``."""
    answer = get(port, "/readyz")
    return answer is not None and answer[0] == status and all(w in answer[1] for w in words)


def test_both_daemons_are_unready_while_redis_is_down_and_ready_again_once_it_is_back(
    private_redis: RedisServerProcess, tmp_path: Path
) -> None:
    hub_db = tmp_path / "hub.db"
    registry, stores = make_runtime(tmp_path / "state", ["alpha"], hub=hub_db)
    for store in stores:
        store.close()
    registry.close()
    relay_port, consumer_port = free_port(), free_port()
    with PipelineProcesses(private_redis.url, tmp_path / "logs") as processes:
        processes.relay(
            "relay",
            tmp_path / "state",
            "--metrics-port",
            str(relay_port),
            "--backoff-max",
            "0.5",
        )
        processes.consumer(
            "consumer", hub_db, "--block-ms", "100", "--metrics-port", str(consumer_port)
        )
        ports = (relay_port, consumer_port)
        processes.wait_until(
            lambda: all(answers(port, 200, "ready") for port in ports), 30, "both daemons ready"
        )

        private_redis.stop()
        processes.wait_until(
            lambda: all(answers(port, 503, "Redis unreachable") for port in ports),
            30,
            "both daemons unready, naming Redis",
        )
        assert all(get(port, "/healthz") == (200, "ok\n") for port in ports)  # still live

        private_redis.start()
        processes.wait_until(
            lambda: all(answers(port, 200, "ready") for port in ports),
            30,
            "both daemons ready again",
        )
        assert processes.stop_all() == {"relay": 0, "consumer": 0}
