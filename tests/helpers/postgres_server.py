"""PostgreSQL for the tests: a private server (``hubsync.servers.postgres``) or an external one.

``PostgresCluster.start()`` starts a private server (``PostgresServer``: initdb
and pg_ctl in a temp dir, on a free loopback port, durability off, as
``nobody`` when run as root); ``close()`` stops it and removes its directory.

``PostgresCluster.external(url)`` uses an existing server instead
(``HUBSYNC_TEST_POSTGRES_URL``; its role must be allowed to create
databases); nothing is started or stopped then.

Each test gets databases of its own (``create_database``, a few tens of
milliseconds), dropped when it ends, or, faster, stores in schemas of their own
in one shared database (``PostgresDatabases``).
"""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import psycopg

from hubsync.core.closing import ClosesOnExit
from hubsync.processes import child_environment
from hubsync.servers.postgres import PostgresServer, PostgresUnavailable, postgres_bindir

__all__ = ["PostgresCluster", "PostgresDatabases", "PostgresUnavailable"]


class PostgresCluster(ClosesOnExit):
    """A PostgreSQL server the tests may create and drop databases on."""

    def __init__(
        self, admin_conninfo: str, url_of: str, server: PostgresServer | None = None
    ) -> None:
        self.admin_conninfo = admin_conninfo
        self._url_of = url_of  # a URL whose path is replaced by each database's name
        self.server = server
        self._prefix = f"hubsync_{secrets.token_hex(3)}_"
        self._count = 0
        self._shared: str | None = None

    @property
    def directory(self) -> Path | None:
        """The private server's directory (its unix socket is there); None for an external one."""
        return self.server.directory if self.server is not None else None

    @classmethod
    def start(cls) -> PostgresCluster:
        """A private server (``PostgresUnavailable`` without the binaries)."""
        server = PostgresServer.start()
        return cls(server.admin_conninfo, server.url(), server)

    @classmethod
    def external(cls, url: str) -> PostgresCluster:
        """An existing server (its role may create databases); never started or stopped here."""
        return cls(url, url)

    # ----- databases -----

    def url(self, database: str) -> str:
        """The URL of ``database`` on this server, with the test role's password."""
        return urlsplit(self._url_of)._replace(path=f"/{database}").geturl()

    def create_database(self) -> str:
        """A new, empty database; its name."""
        self._count += 1
        name = f"{self._prefix}{self._count}"
        with psycopg.connect(self.admin_conninfo, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def shared_database(self) -> str:
        """One database of this session, made on first use, for stores in schemas of their own."""
        if self._shared is None:
            self._shared = self.create_database()
        return self._shared

    def drop_database(self, name: str) -> None:
        """Drop ``name``, ending any session still connected to it."""
        with psycopg.connect(self.admin_conninfo, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def admin(self, database: str) -> psycopg.Connection[tuple[object, ...]]:
        """A superuser (autocommit) connection to ``database``, for a test's own set-up."""
        conninfo = psycopg.conninfo.make_conninfo(self.admin_conninfo, dbname=database)
        return psycopg.connect(conninfo, autocommit=True)

    def close(self) -> None:
        """Stop the server this object started and remove its directory (idempotent)."""
        if self.server is not None:
            self.server.close()
            return
        if self._shared is not None:  # an external server: leave it as found
            self.drop_database(self._shared)
            self._shared = None


class PostgresDatabases:
    """Hub stores for one test, removed when it ends.

    ``new_url()`` is a new, empty database (the plain URL form). ``url_for(key)``
    is a store of its own per key (the contract tests name a store by a
    directory), made fast: a new schema in one database of the session, the
    URL choosing it with ``options=-csearch_path=...``.
    """

    def __init__(self, server: PostgresCluster) -> None:
        self.server = server
        self.databases: list[str] = []
        self.schemas: dict[str, str] = {}

    def new_url(self) -> str:
        """The URL of a new, empty database."""
        name = self.server.create_database()
        self.databases.append(name)
        return self.server.url(name)

    def url_for(self, key: object) -> str:
        """The URL of the store of ``key`` (a schema of the shared database), made on first use."""
        schema = self.schemas.get(str(key))
        if schema is None:
            schema = f"store_{len(self.schemas) + 1}_{secrets.token_hex(4)}"
            with self.server.admin(self.server.shared_database()) as conn:
                conn.execute(f'CREATE SCHEMA "{schema}"')
            self.schemas[str(key)] = schema
        url = self.server.url(self.server.shared_database())
        return f"{url}?options=-csearch_path%3D{schema}"

    def drop_all(self) -> None:
        """Drop every database and schema this test made."""
        if self.schemas:
            with self.server.admin(self.server.shared_database()) as conn:
                for schema in self.schemas.values():
                    conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        for name in self.databases:
            self.server.drop_database(name)
        self.schemas.clear()
        self.databases.clear()


def _tool(name: str) -> Path:
    """``pg_dump`` or ``pg_restore``, beside the server's ``initdb``."""
    bindir = postgres_bindir()
    assert bindir is not None and (bindir / name).exists(), f"no {name} beside initdb"
    return bindir / name


def dump_database(url: str, dump: Path) -> None:
    """``pg_dump --format=custom`` of the database at ``url`` into ``dump``: a hub's backup."""
    subprocess.run(
        [_tool("pg_dump"), "--format=custom", f"--file={dump}", url],
        check=True,
        capture_output=True,
        env=child_environment(),
    )


def restore_database(url: str, dump: Path) -> None:
    """Put ``dump`` back into the database at ``url``, in place of what it holds
    (``pg_restore --clean``, one transaction)."""
    subprocess.run(
        [_tool("pg_restore"), "--clean", "--if-exists", "--single-transaction",
         f"--dbname={url}", dump],
        check=True,
        capture_output=True,
        env=child_environment(),
    )  # fmt: skip
