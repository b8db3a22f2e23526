"""``hubsync.core.connections``: clients by role, the CLI probe's exit codes, the daemon's wait for Redis."""

from __future__ import annotations

import threading

import pytest
import redis

from hubsync.core.connections import (
    BLOCK_MARGIN_SECONDS,
    RedisTarget,
    Role,
    client_options,
    connect,
    probe,
    wait_until_reachable,
)
from hubsync.core.errors import ConfigError, RedisCredentialsError, RedisUnavailableError
from hubsync.demo.embedded_redis import RedisServerProcess, free_port


def test_a_blocking_reader_outlasts_its_block_time_and_a_daemon_uses_short_timeouts() -> None:
    blocking = client_options(Role.BLOCKING, block_seconds=30)
    assert blocking.socket_timeout == 30 + BLOCK_MARGIN_SECONDS
    daemon = client_options(Role.DAEMON)
    assert daemon.socket_timeout < blocking.socket_timeout
    with pytest.raises(ValueError, match="block_seconds"):
        client_options(Role.BLOCKING)


def test_a_client_carries_its_roles_timeouts() -> None:
    client = connect(RedisTarget("redis://127.0.0.1:1/0"), Role.BLOCKING, block_seconds=2)
    kwargs = client.connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] == 2 + BLOCK_MARGIN_SECONDS
    assert kwargs["socket_connect_timeout"] == client_options(Role.DAEMON).socket_connect_timeout
    client.close()


def test_a_malformed_url_is_a_config_error_without_its_password() -> None:
    with pytest.raises(ConfigError, match="Redis URL") as caught:
        connect(RedisTarget("http://user:hunter2-secret@localhost:6379/0"))
    assert "hunter2-secret" not in str(caught.value)


def test_the_probe_names_an_unreachable_redis_without_its_password() -> None:
    url = f"redis://user:hunter2-secret@127.0.0.1:{free_port()}/0"
    with pytest.raises(RedisUnavailableError) as caught:
        probe(RedisTarget(url))
    assert "127.0.0.1" in str(caught.value) and "hunter2-secret" not in str(caught.value)


def test_the_probe_hands_back_a_client_that_answered(redis_url: str) -> None:
    client = probe(RedisTarget(redis_url))
    assert client.ping()
    client.close()


def test_waiting_for_an_unreachable_redis_ends_when_stopped() -> None:
    target = RedisTarget(f"redis://127.0.0.1:{free_port()}/0")
    stop = threading.Event()
    client = connect(target)
    result: list[bool] = []
    waiter = threading.Thread(
        target=lambda: result.append(wait_until_reachable(client, target, stop))
    )
    waiter.start()
    stop.set()
    waiter.join(timeout=10)
    assert result == [False]
    client.close()


def test_a_wrong_password_is_raised_not_waited_out(private_redis: RedisServerProcess) -> None:
    admin = redis.Redis.from_url(private_redis.url)
    admin.config_set("requirepass", "right-one")
    target = RedisTarget(private_redis.url.replace("redis://", "redis://default:wrong-one@"))
    client = connect(target)
    with pytest.raises(
        RedisCredentialsError, match="refused the password for user default"
    ) as refused:
        wait_until_reachable(client, target, threading.Event())
    assert "wrong-one" not in str(refused.value)
    client.close()
    admin.close()
