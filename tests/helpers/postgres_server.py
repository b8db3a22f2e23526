"""A private PostgreSQL cluster for the tests: ``initdb`` and ``pg_ctl`` in a temp dir.

``PostgresCluster.start()`` makes a new cluster in its own temp directory (the
unix socket too), on a free loopback port, with one superuser ``hubsync``
whose password the URLs carry (TCP logins use SCRAM; the socket trusts the
local superuser, for administration). Durability is off (``fsync``,
``synchronous_commit``, ``full_page_writes``): a test cluster never outlives
its session. ``close()`` stops it (``pg_ctl stop -m fast``) and removes the
directory.

``initdb`` refuses to run as root: as root the cluster is made and run as the
unprivileged user ``nobody`` (``setpriv``), its directory owned by that user.

``PostgresCluster.external(url)`` uses an existing server instead
(``HUBSYNC_TEST_POSTGRES_URL``; its role must be allowed to create
databases); nothing is started or stopped then.

Each test gets databases of its own (``create_database``, a few tens of
milliseconds), dropped when it ends, or, faster, stores in schemas of their own
in one shared database (``PostgresDatabases``).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote, urlsplit

import psycopg

from hubsync.closing import ClosesOnExit
from hubsync.demo.embedded_redis import free_port

USER = "hubsync"
BINARIES = ("initdb", "pg_ctl")
UNPRIVILEGED = "nobody"


class PostgresUnavailable(Exception):
    """No PostgreSQL server binaries on this machine."""


def postgres_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``: PATH, ``pg_config --bindir``, then
    ``/usr/lib/postgresql/*/bin`` (newest first); None if there is none."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    candidates: list[Path] = []
    if shutil.which("pg_config"):
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            out = subprocess.run(
                ["pg_config", "--bindir"], capture_output=True, text=True, check=True
            )
            candidates.append(Path(out.stdout.strip()))
    candidates += sorted(
        (Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin")),
        key=lambda p: _version_key(p.parent.name),
        reverse=True,
    )
    for directory in candidates:
        if all((directory / name).is_file() for name in BINARIES):
            return directory
    return None


def _temp_root(as_root: bool) -> str | None:
    """Where the cluster's directory goes: the usual temp dir, unless the unprivileged user
    could not reach it (a TMPDIR under /root, say); then /tmp."""
    base = Path(tempfile.gettempdir()).resolve()
    if not as_root or all(p.stat().st_mode & 0o001 for p in (base, *base.parents)):
        return None
    return "/tmp"


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


class PostgresCluster(ClosesOnExit):
    """A PostgreSQL server the tests may create and drop databases on."""

    def __init__(self, admin_conninfo: str, url_of: str, directory: Path | None) -> None:
        self.admin_conninfo = admin_conninfo
        self._url_of = url_of  # a URL whose path is replaced by each database's name
        self.directory = directory
        self._bindir: Path | None = None
        self._as_user: list[str] = []
        self._prefix = f"hubsync_{secrets.token_hex(3)}_"
        self._count = 0
        self._shared: str | None = None

    # ----- making one -----

    @classmethod
    def start(cls) -> PostgresCluster:
        """initdb a new cluster in a temp dir and start it on a free port."""
        bindir = postgres_bindir()
        if bindir is None:
            raise PostgresUnavailable(
                "PostgreSQL server binaries (initdb, pg_ctl) are not on PATH, in pg_config "
                "--bindir or in /usr/lib/postgresql/*/bin: install the postgresql package "
                "(scripts/test.sh does) or set HUBSYNC_TEST_POSTGRES_URL to a server's URL"
            )
        as_root = os.geteuid() == 0
        directory = Path(tempfile.mkdtemp(prefix="hubsync-pg-", dir=_temp_root(as_root)))
        as_user: list[str] = []
        if as_root:
            # initdb and postgres refuse root: run them as an unprivileged user who owns the dir.
            user = pwd.getpwnam(UNPRIVILEGED)
            os.chown(directory, user.pw_uid, user.pw_gid)
            as_user = [
                "setpriv",
                f"--reuid={user.pw_uid}",
                f"--regid={user.pw_gid}",
                "--clear-groups",
            ]
        password = secrets.token_urlsafe(18)
        cluster = cls("", "", directory)
        cluster._bindir = bindir
        cluster._as_user = as_user
        try:
            cluster._initdb(password)
            port = cluster._start_server()
        except BaseException:
            cluster.close()
            raise
        cluster.admin_conninfo = (
            f"host={directory} port={port} user={USER} dbname=postgres connect_timeout=10"
        )
        cluster._url_of = (
            f"postgresql://{USER}:{quote(password, safe='')}@127.0.0.1:{port}/postgres"
        )
        return cluster

    @classmethod
    def external(cls, url: str) -> PostgresCluster:
        """An existing server (its role may create databases); never started or stopped here."""
        return cls(url, url, None)

    def _run(self, *args: str) -> None:
        assert self._bindir is not None and self.directory is not None
        command = [*self._as_user, str(self._bindir / args[0]), *args[1:]]
        result = subprocess.run(
            command,
            cwd=self.directory,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{args[0]} failed with {result.returncode}: {result.stderr.strip()[-2000:]}"
            )

    def _initdb(self, password: str) -> None:
        assert self.directory is not None
        pwfile = self.directory / "pwfile"
        pwfile.write_text(password + "\n")
        os.chmod(pwfile, 0o600)
        if self._as_user:
            stat = self.directory.stat()
            os.chown(pwfile, stat.st_uid, stat.st_gid)
        try:
            self._run(
                "initdb",
                "--pgdata", str(self.directory / "data"),
                "--username", USER,
                "--pwfile", str(pwfile),
                "--auth-local", "trust",
                "--auth-host", "scram-sha-256",
                "--encoding", "UTF8",
                "--locale", "C",
                "--no-sync",
            )  # fmt: skip
        finally:
            pwfile.unlink(missing_ok=True)

    def _start_server(self) -> int:
        assert self.directory is not None
        last: Exception | None = None
        for _ in range(3):  # a free port may be taken before the server binds it
            port = free_port()
            options = " ".join(
                (
                    f"-p {port}",
                    f"-k {self.directory}",
                    "-c listen_addresses=127.0.0.1",
                    "-c fsync=off",
                    "-c synchronous_commit=off",
                    "-c full_page_writes=off",
                    "-c max_connections=200",
                )
            )
            try:
                self._run(
                    "pg_ctl", "start", "--wait", "--timeout", "60",
                    "--pgdata", str(self.directory / "data"),
                    "--log", str(self.directory / "server.log"),
                    "--options", options,
                )  # fmt: skip
                return port
            except RuntimeError as exc:
                last = exc
        raise RuntimeError(f"the PostgreSQL test server did not start: {last}")

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
        if self.directory is None:
            if self._shared is not None:  # an external server: leave it as found
                self.drop_database(self._shared)
                self._shared = None
            return
        if self._bindir is not None and (self.directory / "data" / "postmaster.pid").exists():
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self._run(
                    "pg_ctl", "stop", "--wait", "--mode", "fast",
                    "--pgdata", str(self.directory / "data"),
                )  # fmt: skip
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = None


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
