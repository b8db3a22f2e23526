"""``RedisTarget``: one Redis as a process reaches it, a value; two of them live side by side.

No process-wide setting decides what ``connect`` does: each target carries its
URL, its password (read once from its file) and its ``--redis-cluster``, so
targets with other passwords or cluster modes coexist in one process.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import redis

from hubsync.core.connections import (
    RedisTarget,
    connect,
    credentials_refused,
    is_cluster,
    probe,
)
from hubsync.core.errors import ConfigError, RedisCredentialsError
from hubsync.core.settings import CommonSettings
from hubsync.demo.embedded_redis import RedisServerProcess

PASSWORD = "t4rget-Pass-91d2"
WATCHER_PASSWORD = "w4tcher-Pass-5e07"


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "redis-password"
    path.write_text(f"{PASSWORD}\n")
    return path


@pytest.fixture
def locked_url(private_redis: RedisServerProcess) -> str:
    """A private redis-server wanting ``PASSWORD`` for ``default`` and its own for ``watcher``."""
    admin = redis.Redis.from_url(private_redis.url)
    admin.acl_setuser(
        "watcher", enabled=True, passwords=[f"+{WATCHER_PASSWORD}"], commands=["+@all"], keys=["*"]
    )
    admin.config_set("requirepass", PASSWORD)
    admin.close()
    return private_redis.url


def test_repr_and_str_never_show_a_password(password_file: Path) -> None:
    from_file = RedisTarget.of("redis://app@10.0.0.5:6380/2", password_file, "no")
    in_url = RedisTarget(f"rediss://app:{PASSWORD}@10.0.0.5:6380/2")
    anonymous = RedisTarget("redis://10.0.0.5:6380/2")
    for target in (from_file, in_url):
        shown = f"{target!r} {target} {[target]} { ({'t': target}) }"
        assert PASSWORD not in shown
        assert "password='***'" in repr(target) and "user='app'" in repr(target)
    assert str(from_file) == from_file.shown == "redis://10.0.0.5:6380/2"
    assert str(in_url) == "rediss://10.0.0.5:6380/2"
    assert repr(from_file) == (
        "RedisTarget(url='redis://10.0.0.5:6380/2', user='app', password='***', cluster='no')"
    )
    assert "password=None" in repr(anonymous) and "user='default'" in repr(anonymous)


def test_a_target_is_a_value_built_once_from_the_settings(
    password_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HUBSYNC_REDIS_URL", "redis://127.0.0.1:7000/0")
    monkeypatch.setenv("HUBSYNC_REDIS_PASSWORD_FILE", str(password_file))
    monkeypatch.setenv("HUBSYNC_REDIS_CLUSTER", "yes")
    target = RedisTarget.from_settings(CommonSettings())
    password_file.write_text("changed-later\n")  # read once: the target keeps what it read
    assert target == RedisTarget("redis://127.0.0.1:7000/0", PASSWORD, "yes")
    assert hash(target) == hash(RedisTarget("redis://127.0.0.1:7000/0", PASSWORD, "yes"))
    with pytest.raises(AttributeError):
        target.url = "redis://elsewhere:6379/0"  # type: ignore[misc]
    rq = target.with_url("redis://127.0.0.1:7100/0")
    assert (rq.password, rq.cluster) == (PASSWORD, "yes")
    assert target.with_url("redis://u:own@127.0.0.1:7100/0").password is None  # the URL's wins


def test_a_password_both_in_the_url_and_in_a_file_is_refused_without_naming_it(
    password_file: Path,
) -> None:
    url = f"redis://default:{PASSWORD}@127.0.0.1:1/0"
    for build in (lambda: RedisTarget.of(url, password_file), lambda: RedisTarget(url, "other")):
        with pytest.raises(ConfigError, match="one place only") as refused:
            build()
        assert PASSWORD not in str(refused.value)


def test_a_password_on_the_command_line_is_warned_about_once_without_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"redis://default:{PASSWORD}@127.0.0.1:1/0"
    with caplog.at_level(logging.WARNING):
        RedisTarget.of(url)  # from the environment: no warning
        RedisTarget.of(url, url_on_command_line=True)
    warnings = [r.getMessage() for r in caplog.records if "process list" in r.getMessage()]
    assert len(warnings) == 1 and PASSWORD not in caplog.text


def test_targets_with_other_passwords_coexist_in_one_process_each_as_its_own(
    locked_url: str, password_file: Path, tmp_path: Path
) -> None:
    default = RedisTarget.of(locked_url, password_file)
    watcher = RedisTarget(locked_url.replace("redis://", f"redis://watcher:{WATCHER_PASSWORD}@"))
    wrong_file = tmp_path / "wrong"
    wrong_file.write_text("not-the-password\n")
    wrong = RedisTarget.of(locked_url, wrong_file)
    anonymous = RedisTarget(locked_url)
    clients = [probe(default), probe(watcher)]
    try:
        for _ in range(2):  # interleaved: neither target's credentials leak into the other's
            assert clients[0].acl_whoami() == "default"
            assert clients[1].acl_whoami() == "watcher"
            with pytest.raises(RedisCredentialsError, match="refused the password") as refused:
                probe(wrong)
            assert "not-the-password" not in str(refused.value)
            with pytest.raises(RedisCredentialsError, match="without a password"):
                probe(anonymous)
            extra = connect(default)
            assert extra.ping() is True
            extra.close()
    finally:
        for client in clients:
            client.close()
    message = str(credentials_refused(watcher, redis.AuthenticationError("nope")))
    assert "user watcher" in message and WATCHER_PASSWORD not in message


def test_targets_with_other_cluster_modes_coexist_in_one_process(
    cluster_url: str, redis_url: str
) -> None:
    auto = RedisTarget(cluster_url)
    single = RedisTarget(cluster_url, cluster="no")  # the same node, administered alone
    plain = RedisTarget(redis_url)
    made = []
    try:
        for _ in range(2):
            made += [connect(auto), connect(single), connect(plain)]
            assert [is_cluster(c) for c in made[-3:]] == [True, False, False]
        assert auto.uses_cluster() and not single.uses_cluster() and not plain.uses_cluster()
        assert auto == RedisTarget(cluster_url)  # what auto found takes no part in equality
        assert RedisTarget(cluster_url, cluster="yes").uses_cluster()
    finally:
        for client in made:
            client.close()
