"""A private PostgreSQL server: ``initdb`` and ``pg_ctl`` in a temp dir, on a free loopback port.

``PostgresServer.start()`` makes a new cluster in its own temp directory (the
unix socket too) with one superuser, ``hubsync``, whose password the URLs
carry (TCP logins use SCRAM; the socket trusts the local superuser, for
administration), and starts it with the given settings (``-c name=value``).
``close()`` stops it (``pg_ctl stop -m fast``) and removes the directory.
The tests run it with durability off (``DISPOSABLE``): their servers never
outlive a session.

``initdb`` refuses to run as root: as root the cluster is made and run as the
unprivileged user ``nobody`` (``setpriv``), its directory owned by that user
(under /tmp when the usual temp dir is out of that user's reach).

The binaries are found on PATH, through ``pg_config --bindir``, or in
``/usr/lib/postgresql/*/bin`` (newest first); without them ``start`` raises
``PostgresUnavailable``.
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
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

from hubsync.core.closing import ClosesOnExit
from hubsync.core.errors import HubsyncError
from hubsync.demo.embedded_redis import free_port

USER = "hubsync"
"""The superuser ``initdb`` makes."""
BINARIES = ("initdb", "pg_ctl")
UNPRIVILEGED = "nobody"

DISPOSABLE: Mapping[str, str] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
}
"""Durability off: for a server whose data never outlives the process that started it."""


class PostgresUnavailable(HubsyncError):
    """No PostgreSQL server binaries on this machine."""


class PostgresServerError(HubsyncError):
    """``initdb`` or ``pg_ctl`` failed."""


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


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def _temp_root(as_root: bool) -> str | None:
    """Where the cluster's directory goes: the usual temp dir, unless the unprivileged user
    could not reach it (a TMPDIR under /root, say); then /tmp."""
    base = Path(tempfile.gettempdir()).resolve()
    if not as_root or all(p.stat().st_mode & 0o001 for p in (base, *base.parents)):
        return None
    return "/tmp"  # noqa: S108 (mkdtemp makes a private directory in it)


class PostgresServer(ClosesOnExit):
    """One private PostgreSQL server, started by ``start`` and removed by ``close``."""

    def __init__(self, bindir: Path, directory: Path, as_user: list[str]) -> None:
        self.bindir = bindir
        self.directory: Path | None = directory
        self.port = 0
        self._as_user = as_user
        self._password = secrets.token_urlsafe(18)
        self._settings: Mapping[str, str] = {}

    @classmethod
    def start(cls, settings: Mapping[str, str] = DISPOSABLE) -> PostgresServer:
        """initdb a new cluster in a temp dir and start it on a free port with ``settings``."""
        bindir = postgres_bindir()
        if bindir is None:
            raise PostgresUnavailable(
                "PostgreSQL server binaries (initdb, pg_ctl) are not on PATH, in pg_config "
                "--bindir or in /usr/lib/postgresql/*/bin: install the postgresql package"
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
        server = cls(bindir, directory, as_user)
        try:
            server._initdb()
            server._start_server(settings)
        except BaseException:
            server.close()
            raise
        return server

    @property
    def admin_conninfo(self) -> str:
        """libpq conninfo of the superuser over the unix socket, database ``postgres``."""
        return (
            f"host={self.directory} port={self.port} user={USER} dbname=postgres connect_timeout=10"
        )

    def url(self, database: str = "postgres") -> str:
        """``postgresql://hubsync:<password>@127.0.0.1:<port>/<database>`` (TCP, SCRAM)."""
        return (
            f"postgresql://{USER}:{quote(self._password, safe='')}@127.0.0.1:{self.port}/{database}"
        )

    @property
    def pid(self) -> int | None:
        """The postmaster's pid (every backend is its child); None when it is not running."""
        if self.directory is None:
            return None
        try:
            return int((self.directory / "data" / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def version(self) -> str:
        """``postgres --version`` of the binaries this server runs."""
        out = subprocess.run(
            [str(self.bindir / "postgres"), "--version"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return out.stdout.strip() or out.stderr.strip() or "?"

    def _run(self, *args: str) -> None:
        assert self.directory is not None
        command = [*self._as_user, str(self.bindir / args[0]), *args[1:]]
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
            raise PostgresServerError(
                f"{args[0]} failed with {result.returncode}: {result.stderr.strip()[-2000:]}"
            )

    def _initdb(self) -> None:
        assert self.directory is not None
        pwfile = self.directory / "pwfile"
        pwfile.write_text(self._password + "\n")
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

    def _start_server(self, settings: Mapping[str, str]) -> None:
        self._settings = settings
        last: Exception | None = None
        for _ in range(3):  # a free port may be taken before the server binds it
            try:
                self._pg_ctl_start(free_port())
                return
            except PostgresServerError as exc:
                last = exc
        raise PostgresServerError(f"the private PostgreSQL server did not start: {last}")

    def _pg_ctl_start(self, port: int) -> None:
        assert self.directory is not None
        options = " ".join(
            (
                f"-p {port}",
                f"-k {self.directory}",
                "-c listen_addresses=127.0.0.1",
                *(f"-c {name}={value}" for name, value in self._settings.items()),
            )
        )
        self._run(
            "pg_ctl", "start", "--wait", "--timeout", "60",
            "--pgdata", str(self.directory / "data"),
            "--log", str(self.directory / "server.log"),
            "--options", options,
        )  # fmt: skip
        self.port = port

    def stop(self, mode: str = "fast") -> None:
        """Stop the server, keeping its files (``mode``: pg_ctl's ``fast``, or ``immediate``:
        as a crash, recovered from the WAL at the next start)."""
        assert self.directory is not None, "a closed server"
        self._run(
            "pg_ctl", "stop", "--wait", "--mode", mode, "--pgdata", str(self.directory / "data")
        )

    def start_again(self) -> None:
        """Start the stopped server on the same port, with the same settings."""
        self._pg_ctl_start(self.port)

    def close(self) -> None:
        """Stop the server and remove its directory (idempotent)."""
        if self.directory is None:
            return
        if (self.directory / "data" / "postmaster.pid").exists():
            with contextlib.suppress(PostgresServerError, subprocess.TimeoutExpired):
                self._run(
                    "pg_ctl", "stop", "--wait", "--mode", "fast",
                    "--pgdata", str(self.directory / "data"),
                )  # fmt: skip
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = None
