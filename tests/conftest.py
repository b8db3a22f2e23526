"""Fixtures: a private real redis-server (own port, own temp dir), fakeredis, and a private
PostgreSQL cluster.

Nothing here touches the machine's Redis on 6379 or PostgreSQL on 5432.
``redis_server`` is one server for the session; ``redis_url``/``redis_client``
hand each test a flushed database on it. ``private_redis`` is a server of the
test's own, with AOF, for tests that stop, kill or restart it.
``redis_cluster`` (with ``cluster_url``, flushed per test) is a private Redis
Cluster of 3 masters with a replica each for the session;
``private_redis_cluster`` one of the test's own, for tests that kill a master.

``postgres_server`` is one PostgreSQL cluster per session (per xdist worker),
made with initdb in a temp dir (``tests/helpers/postgres_server.py``), or the
server ``HUBSYNC_TEST_POSTGRES_URL`` names; without either, the tests using it
are skipped (and fail in CI). ``postgres_databases`` hands a test new, empty
databases, dropped when it ends; ``postgres_url`` is the URL of one.

Child processes the tests start run this checkout's code: its root goes first
on their ``PYTHONPATH``, whatever copy of hubsync is installed. A test that
uses a real-Redis fixture is marked ``redis`` here, from its fixtures, and one
that uses a PostgreSQL fixture ``postgres``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import fakeredis
import pytest
import redis

from hubstore.redis_functions import load_library
from hubsync.demo.embedded_redis import RedisServerProcess
from hubsync.servers.redis_cluster import RedisClusterProcesses
from tests.helpers.support import require_redis_server, unavailable
from tests.helpers.trust import forget_enrollments

if TYPE_CHECKING:
    from playwright.sync_api import Browser

    from tests.helpers.postgres_server import PostgresCluster, PostgresDatabases

ROOT = Path(__file__).resolve().parents[1]
REAL_REDIS_FIXTURES = frozenset(
    {
        "redis_server",
        "redis_url",
        "redis_client",
        "private_redis",
        "redis_cluster",
        "cluster_url",
        "private_redis_cluster",
    }
)
"""Using any of these makes a test a ``redis`` test."""
POSTGRES_FIXTURES = frozenset({"postgres_server", "postgres_databases", "postgres_url"})
"""Using any of these makes a test a ``postgres`` test."""
BROWSER_FIXTURES = frozenset({"chromium"})
"""Using any of these makes a test a ``browser`` test."""

os.environ["PYTHONPATH"] = os.pathsep.join(
    part for part in (str(ROOT), os.environ.get("PYTHONPATH")) if part
)


E2E_FOLDER = Path(__file__).resolve().parent / "e2e"
"""Every test in it is an ``e2e`` test (the whole pipeline as real processes), and only those:
the folder is the mark. A test elsewhere marked ``e2e`` by hand stops the collection."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``e2e`` every test in ``tests/e2e/``, and ``redis`` (``postgres``, ``browser``)
    every test that uses a real-Redis (PostgreSQL, chromium) fixture, however indirectly.

    A test outside ``tests/e2e/`` that carries an ``e2e`` mark of its own is a usage error:
    a whole-pipeline test moves into the folder (its shared parts into ``tests/helpers/``).
    """
    misplaced = [
        item.nodeid
        for item in items
        if not item.path.is_relative_to(E2E_FOLDER) and item.get_closest_marker("e2e")
    ]
    if misplaced:
        raise pytest.UsageError(
            "the e2e mark comes from the folder: move these tests into tests/e2e/ "
            "(their shared parts into tests/helpers/) and drop the mark: " + ", ".join(misplaced)
        )
    for item in items:
        if item.path.is_relative_to(E2E_FOLDER):
            item.add_marker(pytest.mark.e2e)
        fixtures = set(getattr(item, "fixturenames", ()))
        if REAL_REDIS_FIXTURES & fixtures:
            item.add_marker(pytest.mark.redis)
        if POSTGRES_FIXTURES & fixtures:
            item.add_marker(pytest.mark.postgres)
        if BROWSER_FIXTURES & fixtures:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def chromium() -> Iterator[Browser]:
    """Debian's chromium under Playwright for the session (``tests/helpers/browser_support``):
    skipped without it, failed in CI."""
    from playwright.sync_api import sync_playwright

    from tests.helpers.browser_support import require_chromium

    path = require_chromium()
    with sync_playwright() as playwright:
        # --no-sandbox: root (CI, containers) cannot use chromium's user-namespace sandbox
        browser = playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServerProcess]:
    """One private redis-server for the whole session."""
    require_redis_server()
    server = RedisServerProcess(directory=tmp_path_factory.mktemp("redis-session"))
    server.start()
    yield server
    server.close()


@pytest.fixture
def redis_url(redis_server: RedisServerProcess) -> Iterator[str]:
    """URL of a flushed database on the session's private redis-server, with hubsync's
    functions loaded (whatever an earlier test did to them)."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.script_flush()
    load_library(client)
    yield redis_server.url
    client.close()


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """A client of the flushed private database."""
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServerProcess]:
    """A redis-server of this test's own, with AOF, free to be stopped or killed."""
    require_redis_server()
    server = RedisServerProcess(directory=tmp_path / "redis", appendonly=True)
    server.directory.mkdir(parents=True, exist_ok=True)
    server.start()
    yield server
    server.close()


@contextmanager
def running_cluster(directory: Path) -> Iterator[RedisClusterProcesses]:
    """A private Redis Cluster in ``directory``, stopped (whatever it got to) at the end."""
    require_redis_server()
    cluster = RedisClusterProcesses(directory)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterProcesses]:
    """One private Redis Cluster for the session: 3 masters with a replica each."""
    with running_cluster(tmp_path_factory.mktemp("redis-cluster-session")) as cluster:
        yield cluster


@pytest.fixture
def cluster_url(redis_cluster: RedisClusterProcesses) -> str:
    """URL of the session's private cluster, emptied (every master flushed) for this test."""
    redis_cluster.flush()
    return redis_cluster.url


@pytest.fixture
def private_redis_cluster(tmp_path: Path) -> Iterator[RedisClusterProcesses]:
    """A Redis Cluster of this test's own, free to lose a master (kill -9, failover)."""
    with running_cluster(tmp_path / "redis-cluster") as cluster:
        yield cluster


@pytest.fixture
def fake_redis() -> Iterator[fakeredis.FakeRedis]:
    """An in-memory fakeredis with Lua, for unit logic."""
    client = fakeredis.FakeRedis()
    yield client
    client.close()


@pytest.fixture(autouse=True)
def _forget_enrollments() -> Iterator[None]:
    """Each test enrolls its own runtimes: none signs with another test's key."""
    yield
    forget_enrollments()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresCluster]:
    """One PostgreSQL server for the session: a private cluster, or HUBSYNC_TEST_POSTGRES_URL's."""
    from tests.helpers.postgres_server import PostgresCluster, PostgresUnavailable

    external = os.environ.get("HUBSYNC_TEST_POSTGRES_URL")
    if external:
        with PostgresCluster.external(external) as server:  # drops what it made, nothing else
            yield server
        return
    try:
        cluster = PostgresCluster.start()
    except PostgresUnavailable as exc:
        unavailable(str(exc))
    with cluster:
        yield cluster


@pytest.fixture
def postgres_databases(postgres_server: PostgresCluster) -> Iterator[PostgresDatabases]:
    """New PostgreSQL databases for this test, dropped at its end."""
    from tests.helpers.postgres_server import PostgresDatabases

    databases = PostgresDatabases(postgres_server)
    yield databases
    databases.drop_all()


@pytest.fixture
def postgres_url(postgres_databases: PostgresDatabases) -> str:
    """The URL of a new, empty PostgreSQL database of this test's own."""
    return postgres_databases.new_url()
