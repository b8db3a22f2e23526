"""Commands authenticate with a password kept off their command line.

A private redis-server with ``requirepass``. A password in a URL on the command
line still works, with one warning that never names it; a missing or wrong one
is one line naming the user. (The relay and a consumer draining a pipeline with
``--redis-password-file`` are in ``tests/e2e/test_redis_password_file.py``.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hubsync.core.connections import RedisTarget, connect, read_password_file
from hubsync.core.errors import ConfigError
from hubsync.demo.embedded_redis import RedisServerProcess
from hubsync.processes import run_hubsync
from producers.registry import RuntimeRegistry
from tests.helpers.operator_support import CliRun, run_cli
from tests.helpers.redis_auth import PASSWORD, requiring_password, write_password_file


@pytest.fixture
def locked_redis(private_redis: RedisServerProcess) -> Iterator[str]:
    """The URL (no password) of a private redis-server that requires ``PASSWORD``."""
    with requiring_password(private_redis) as url:
        yield url


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    return write_password_file(tmp_path)


def test_a_password_in_a_url_on_the_command_line_works_with_one_warning_naming_no_password(
    tmp_path: Path, locked_redis: str
) -> None:
    with_password = locked_redis.replace("redis://", f"redis://default:{PASSWORD}@")
    result = run_hubsync(
        ["consume", "--hub-db", str(tmp_path / "hub.db"), "--redis-url", with_password, "--once"],
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "process list" in line]
    assert len(warnings) == 1 and "HUBSYNC_REDIS_URL" in warnings[0]
    assert "--redis-password-file" in warnings[0]
    assert PASSWORD not in result.stderr + result.stdout
    from_env = run_hubsync(
        ["consume", "--hub-db", str(tmp_path / "hub.db"), "--once"],
        env={"HUBSYNC_REDIS_URL": with_password},
        timeout=60,
    )
    assert from_env.returncode == 0, from_env.stderr
    assert "process list" not in from_env.stderr


def test_without_the_password_a_daemon_is_refused_by_redis(
    tmp_path: Path, locked_redis: str
) -> None:
    result = run_hubsync(
        ["consume", "--hub-db", str(tmp_path / "hub.db"), "--redis-url", locked_redis, "--once"],
        timeout=60,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("content", "message"), [("\n  \n", "the file is empty"), (None, "cannot read it")]
)
def test_an_empty_or_missing_password_file_is_a_usage_error_naming_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "pw"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        read_password_file(path)
    result = run_cli(
        capsys, "consume", "--hub-db", str(tmp_path / "hub.db"), "--redis-password-file", str(path)
    )
    assert result.code == 2
    assert message in result.err and str(path) in result.err


def test_a_password_in_the_url_and_a_password_file_at_once_is_refused(
    password_file: Path,
) -> None:
    url = f"redis://default:{PASSWORD}@127.0.0.1:1/0"
    with pytest.raises(ConfigError, match="one place only") as refused:
        RedisTarget.of(url, password_file)
    assert PASSWORD not in str(refused.value)


def test_every_client_of_a_target_uses_the_password_of_its_file(
    locked_redis: str, password_file: Path
) -> None:
    client = connect(RedisTarget.of(locked_redis, password_file))
    try:
        assert client.ping() is True
    finally:
        client.close()
    anonymous = connect(RedisTarget(locked_redis))
    try:
        with pytest.raises(redis.AuthenticationError):
            anonymous.ping()
    finally:
        anonymous.close()


def test_a_wrong_password_is_a_refusal_not_an_unreachable_redis(
    capsys: pytest.CaptureFixture[str], locked_redis: str
) -> None:
    wrong = locked_redis.replace("redis://", "redis://default:not-the-password@", 1)
    # in the environment: typed on the command line, it would also be warned about
    result = run_cli(
        capsys, "dead", "list", "--hub-project", "shop", env={"HUBSYNC_REDIS_URL": wrong}
    )
    assert result.code == 1, result.err
    assert result.err == (
        f"error: Redis refused the password for user default at {locked_redis} (invalid "
        "username-password pair or user is disabled); check the password in "
        "--redis-password-file (HUBSYNC_REDIS_PASSWORD_FILE) or in the Redis URL\n"
    )


def test_a_wrong_password_fails_check_as_a_refusal_not_an_unreachable_redis(
    capsys: pytest.CaptureFixture[str], locked_redis: str, tmp_path: Path
) -> None:
    wrong = locked_redis.replace("redis://", "redis://default:not-the-password@", 1)
    with RuntimeRegistry(tmp_path / "state") as registry:
        registry.register_project(tmp_path / "shop")
    checks = {
        "relay": ["relay", "--state-dir", str(tmp_path / "state"), "--check"],
        "consume": ["consume", "--hub-db", str(tmp_path / "hub.db"), "--name", "h", "--check"],
        "effects-worker": ["effects-worker", "--check"],
    }
    for command, argv in checks.items():
        result = run_cli(capsys, *argv, env={"HUBSYNC_REDIS_URL": wrong})
        assert result.code == 1, (command, result.err)
        assert result.err.startswith("error: Redis refused the password for user default"), (
            command,
            result.err,
        )
        assert "not-the-password" not in result.err


def operator_commands(tmp_path: Path) -> dict[str, list[str]]:
    """A call of every command that talks to Redis, each answered at once (no daemon left)."""
    with RuntimeRegistry(tmp_path / "state") as registry:
        registry.register_project(tmp_path / "shop")
    hub_db = str(tmp_path / "hub.db")
    return {
        "status": ["status"],
        "doctor": ["doctor"],
        "dead list": ["dead", "list", "--hub-project", "shop"],
        "alerts list": ["alerts", "list"],
        "lease show": ["lease", "show", "effect:x"],
        "lease list": ["lease", "list"],
        "consume --once": ["consume", "--hub-db", hub_db, "--once"],
        "relay --once": ["relay", "--state-dir", str(tmp_path / "state"), "--once"],
        "effects-worker --burst": ["effects-worker", "--burst"],
    }


def with_password_file(
    capsys: pytest.CaptureFixture[str], argv: list[str], password_file: Path, redis_url: str
) -> CliRun:
    """``hubsync ARGV --redis-password-file PASSWORD_FILE`` in-process, against ``redis_url``."""
    return run_cli(
        capsys,
        *argv,
        "--redis-password-file",
        str(password_file),
        env={"HUBSYNC_REDIS_URL": redis_url},
    )


def test_every_command_that_talks_to_redis_names_a_refused_password_and_exits_1(
    capsys: pytest.CaptureFixture[str], locked_redis: str, tmp_path: Path
) -> None:
    wrong = tmp_path / "wrong-password"
    wrong.write_text("not-the-password\n")
    refused = f"Redis refused the password for user default at {locked_redis}"
    for command, argv in operator_commands(tmp_path).items():
        result = with_password_file(capsys, argv, wrong, locked_redis)
        assert result.code == 1, (command, result.err)
        said = result.out + result.err
        assert refused in said, (command, said)
        assert "cannot reach" not in said and "not-the-password" not in said, (command, said)
        if command != "doctor":  # doctor says it on its failed redis line, on stdout
            assert result.err.startswith(f"error: {refused}"), (command, result.err)
            assert len(result.err.splitlines()) == 1, (command, result.err)


def test_every_command_that_talks_to_redis_takes_the_password_from_a_file(
    capsys: pytest.CaptureFixture[str], locked_redis: str, password_file: Path, tmp_path: Path
) -> None:
    for command, argv in operator_commands(tmp_path).items():
        by_option = with_password_file(capsys, argv, password_file, locked_redis)
        by_variable = run_cli(
            capsys,
            *argv,
            env={
                "HUBSYNC_REDIS_URL": locked_redis,
                "HUBSYNC_REDIS_PASSWORD_FILE": str(password_file),
            },
        )
        for result in (by_option, by_variable):
            said = result.out + result.err
            assert "refused the password" not in said and "cannot reach" not in said, (
                command,
                said,
            )
            if command == "doctor":
                assert "ok   redis:" in result.out, result.out
            elif command == "dead list":  # Redis answered: no such hub project yet
                assert result.code == 2 and "unknown hub project" in result.err, result.err
            else:
                assert result.code == 0, (command, result.err)


def test_every_operator_command_warns_once_of_a_password_typed_in_its_redis_url(
    capsys: pytest.CaptureFixture[str], locked_redis: str, tmp_path: Path
) -> None:
    with_password = locked_redis.replace("redis://", f"redis://default:{PASSWORD}@")
    commands = operator_commands(tmp_path)
    for command in ("status", "doctor", "alerts list", "lease show", "lease list"):
        typed = run_cli(capsys, *commands[command], "--redis-url", with_password)
        warnings = [line for line in typed.err.splitlines() if "process list" in line]
        assert len(warnings) == 1, (command, typed.err)
        assert warnings[0].startswith("warning: the password in --redis-url on the command line")
        assert "HUBSYNC_REDIS_URL" in warnings[0] and PASSWORD not in typed.err + typed.out
        from_env = run_cli(capsys, *commands[command], env={"HUBSYNC_REDIS_URL": with_password})
        assert "process list" not in from_env.err, (command, from_env.err)


def test_an_acl_user_with_a_wrong_password_is_named_in_the_refusal(
    capsys: pytest.CaptureFixture[str], locked_redis: str, password_file: Path, tmp_path: Path
) -> None:
    admin = redis.Redis.from_url(locked_redis, password=PASSWORD)
    admin.acl_setuser(
        "watcher", enabled=True, passwords=["+watcher-pass"], commands=["+@all"], keys=["*"]
    )
    admin.close()
    watcher = locked_redis.replace("redis://", "redis://watcher@", 1)
    wrong = tmp_path / "wrong-password"
    wrong.write_text("not-the-password\n")
    for argv in (["status"], ["alerts", "list"], ["lease", "list"]):
        result = run_cli(
            capsys,
            *argv,
            env={"HUBSYNC_REDIS_URL": watcher, "HUBSYNC_REDIS_PASSWORD_FILE": str(wrong)},
        )
        assert result.code == 1, result.err
        assert result.err.startswith("error: Redis refused the password for user watcher"), (
            result.err
        )
        assert "not-the-password" not in result.err and "watcher-pass" not in result.err
    right = tmp_path / "watcher-password"
    right.write_text("watcher-pass\n")
    result = run_cli(
        capsys,
        "status",
        env={"HUBSYNC_REDIS_URL": watcher, "HUBSYNC_REDIS_PASSWORD_FILE": str(right)},
    )
    assert result.code == 0, result.err


def test_no_password_for_a_redis_that_wants_one_says_how_to_give_it(
    capsys: pytest.CaptureFixture[str], locked_redis: str
) -> None:
    result = run_cli(capsys, "status", env={"HUBSYNC_REDIS_URL": locked_redis})
    assert result.code == 1, result.err
    assert result.err.startswith(
        f"error: Redis refused user default at {locked_redis} without a password; put the "
        "password in a file named by --redis-password-file"
    ), result.err
