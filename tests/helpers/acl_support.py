"""What the tests of ``hubsync acl`` share: a server whose only open user is its admin, the
lines applied as an administrator would, a URL that logs in as a user, and two runtimes
that each connect as their own user."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

import pytest
import redis

from hubsync.core import keys
from hubsync.demo.embedded_redis import RedisServerProcess
from hubsync.processes import run_hubsync
from producers.registry import RuntimeRegistry
from producers.store.event_store import RunEventStore
from tests.helpers.relay_support import make_runtime

HUB_PROJECT = "acme"
PASSWORD = "s3cret-Password-for-tests"
ADMIN_PASSWORD = "admin-" + PASSWORD
PREFIX = "t-"


def admin_only(server_url: str) -> redis.Redis:
    """Switch the server's default user off, leaving a user ``admin`` with every right; its
    client (the caller closes it). The server is then ACL-enabled as a deployment's is."""
    setup = redis.Redis.from_url(server_url)
    setup.execute_command(
        "ACL", "SETUSER", "admin", "on", f">{ADMIN_PASSWORD}", "~*", "&*", "+@all"
    )
    setup.execute_command("ACL", "SETUSER", "default", "off")
    setup.close()
    admin = redis.Redis.from_url(user_url(server_url, "admin", ADMIN_PASSWORD))
    admin.execute_command("ACL", "LOG", "RESET")
    return admin


def apply_lines(admin: redis.Redis, lines: list[str]) -> None:
    """Run each ``ACL SETUSER`` line as one command, as redis-cli would.

    Only the CLIENT SETINFO line may be refused, and only as an unknown command
    (Redis 7.0 and 7.1 do not have it).
    """
    for line in lines:
        try:
            admin.execute_command(*shlex.split(line))
        except redis.ResponseError as exc:
            if not (line.endswith("+client|setinfo") and "Unknown command" in str(exc)):
                raise


def user_url(server_url: str, user: str, password: str = PASSWORD) -> str:
    """``server_url`` authenticating as ``user``."""
    scheme, rest = server_url.split("://", 1)
    return f"{scheme}://{quote(user, safe='')}:{quote(password, safe='')}@{rest}"


def hubsync_acl(tmp_path: Path, *argv: str) -> list[str]:
    """``hubsync acl ARGV --password-file F`` as a real command: its stdout lines."""
    password_file = tmp_path / "password"
    password_file.write_text(PASSWORD + "\n")
    done = run_hubsync(
        ["acl", *argv, "--user-prefix", PREFIX, "--password-file", str(password_file)]
    )
    assert done.returncode == 0, done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    return done.stdout.splitlines()


@pytest.fixture
def acl_redis(private_redis: RedisServerProcess) -> Iterator[tuple[str, redis.Redis]]:
    """The private server with the default user switched off: (its URL, an admin client).

    A test module uses it by importing it (``from tests.helpers.acl_support import acl_redis``).
    """
    admin = admin_only(private_redis.url)
    yield private_redis.url, admin
    admin.close()


@dataclass
class EnrolledRuntime:
    """A runtime enrolled for ``HUB_PROJECT``: its registry, its one project's store, and the
    Redis URL it connects with."""

    registry: RuntimeRegistry
    store: RunEventStore
    url: str

    @property
    def runtime_id(self) -> str:
        return self.registry.runtime_id

    @property
    def project_id(self) -> str:
        return self.store.project_id

    @property
    def events(self) -> str:
        """Its own events stream: the only one its Redis user may write to."""
        return keys.events_stream(HUB_PROJECT, self.runtime_id)

    def close(self) -> None:
        self.store.close()
        self.registry.close()


R = TypeVar("R", bound=EnrolledRuntime)


@contextmanager
def two_runtime_users(
    kind: type[R], server_url: str, admin: redis.Redis, tmp_path: Path, hub_db: Path
) -> Iterator[tuple[R, R, str]]:
    """rt-a and rt-b enrolled for ``HUB_PROJECT`` on the SQLite hub at ``hub_db``, each a
    ``kind`` connecting as the user ``hubsync acl`` prints for it (applied by ``admin``),
    and the URL of the consumer's user: ``(rt_a, rt_b, consumer_url)``. Closed on exit."""
    runtimes: list[R] = []
    try:
        for name in ("a", "b"):
            state_dir = tmp_path / f"rt-{name}" / "state"
            registry, (store,) = make_runtime(state_dir, [HUB_PROJECT], hub_db)
            argv = ["--runtime", registry.runtime_id, "--hub-project", HUB_PROJECT]
            apply_lines(admin, hubsync_acl(tmp_path, *argv))
            user = f"{PREFIX}runtime-{registry.runtime_id}"
            runtimes.append(kind(registry, store, user_url(server_url, user)))
        apply_lines(admin, hubsync_acl(tmp_path, "--consumer"))
        yield runtimes[0], runtimes[1], user_url(server_url, f"{PREFIX}consumer")
    finally:
        for runtime in runtimes:
            runtime.close()
