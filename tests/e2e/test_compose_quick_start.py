"""The quick start in docker-compose.yml's header runs, step by step in its order, with each
service's environment, against a private Redis and a SQLite hub (Docker is not needed)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import redis

from hubstore import hub_url_from_path, open_store
from hubsync.demo.embedded_redis import RedisServerProcess
from tests.helpers.deployment_docs import (
    COMPOSE_QUICK_START,
    DAEMONS,
    SERVICES,
    argv,
    compose_run_stages,
    in_volume,
    run_documented,
)
from tests.helpers.support import scrub_environment


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Options must come from the file, not from this machine's environment."""
    scrub_environment(monkeypatch, "RQ_")


def test_the_quick_start_runs_in_order_against_a_private_redis_and_a_temp_hub(
    tmp_path: Path, private_redis: RedisServerProcess
) -> None:
    """Every hubsync step of the compose quick start, in its order, as its service runs it:
    the service's environment, with the private Redis and a SQLite hub in place of the
    containers' (``hub-migrate`` first, as compose starts it before the consumers), and each
    volume a directory. ``docker compose up -d`` runs each hubsync daemon with ``--once``."""
    hub_url = hub_url_from_path(tmp_path / "hub.db")

    def run(service: str, args: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
        volumes = dict(str(v).split(":")[::-1] for v in SERVICES[service].get("volumes", ()))
        args = [in_volume(arg, volumes, tmp_path) for arg in args]
        metrics = [i + 1 for i, arg in enumerate(args) if arg == "--metrics-port"]
        for i in metrics:  # metrics off: ports are shared with whatever else runs here
            args[i] = "0"
        assert args[0] == "hubsync", f"{service}: {args}"
        environment = {str(k): str(v) for k, v in SERVICES[service].get("environment", {}).items()}
        environment["HUBSYNC_REDIS_URL"] = private_redis.url
        # the compose file's Redis URL on a command line (hub-migrate's) is the private one too
        args = [private_redis.url if arg.startswith("redis://redis:") else arg for arg in args]
        if "HUBSYNC_HUB_URL" in environment:
            environment["HUBSYNC_HUB_URL"] = hub_url
        return run_documented(args, environment, stdin)

    with redis.Redis.from_url(private_redis.url) as admin:
        admin.function_flush()  # a fresh Redis container's: hub-migrate loads the functions
    run("hub-migrate", argv(SERVICES["hub-migrate"]["command"]))
    for command in COMPOSE_QUICK_START:
        if command.startswith("docker compose run "):
            piped = ""
            for service, args in compose_run_stages(command):
                piped = run(service, args, piped).stdout
        elif command == "docker compose up -d":
            daemons = [n for n in DAEMONS if argv(SERVICES[n]["command"])[0] == "hubsync"]
            for name in sorted(daemons, key=lambda n: n != "relay"):  # the relay sends first
                run(name, [*argv(SERVICES[name]["command"]), "--once"])
    with open_store(hub_url, create_schema=False) as hub:
        assert hub.count_events() == 10 * 20  # produce's --runs 10 --events-per-run 20
