"""Open the hub store a URL names: the URL's scheme picks the backend module.

Hub URLs:

* ``sqlite:///PATH``: a SQLite file. Everything after ``sqlite:///`` is the
  path, taken literally: ``sqlite:///hub.db`` is relative to the current
  directory, ``sqlite:////var/lib/hubsync/hub.db`` (four slashes) is absolute.
  No options may follow the path. ``--hub-db PATH`` is shorthand for
  ``hub_url_from_path(PATH)``, which always writes the absolute form.
* ``postgresql://[user[:password]@]host[:port]/database[?parameters]`` (or
  ``postgres://``): a PostgreSQL database, shared by consumers on any host.
  The parameters are libpq's (``sslmode``, ``connect_timeout``, ...) plus
  ``pool_size``, the most connections one store opens (``postgres_store``).
* ``memory://``: a new, empty in-memory store per open, for tests; nothing
  survives the process and no other process can open it.

A backend is a module in ``BACKENDS`` with two functions,
``open_hub_store(url, *, create_schema, busy_budget) -> HubStore`` and
``migrate_hub_store(url, *, busy_budget) -> SchemaChange``; another
database plugs in as one more module and one more entry. Modules are imported
only when their scheme is opened, so a backend's driver (psycopg for
PostgreSQL) is needed only by those who use it; opening a URL whose driver is
not installed is a ``MissingDependencyError`` naming the ``pip install`` that
adds it (``DRIVERS``), not an ``ImportError``.

Opening never creates or upgrades a schema unless asked: ``hubsync consume``
opens with ``create_schema=True``, and ``hubsync hub migrate`` calls
``migrate_store``; commands that only read (``status``, ``alerts list``, the
maintenance job) open with False and get a ``SchemaVersionError`` saying how
to create a missing schema or upgrade an older one: they never write it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Protocol, cast
from urllib.parse import SplitResult, parse_qsl, quote, urlencode, urlsplit

from hubsync.core.errors import ConfigError, MissingDependencyError
from hubsync.core.settings import hub_url_from_path

if TYPE_CHECKING:
    from hubstore.store import HubStore
    from hubsync.core.migration import SchemaChange

__all__ = [
    "BACKENDS",
    "hub_url_from_path",
    "migrate_store",
    "open_store",
    "shown_url",
    "unsplit_url",
    "url_scheme",
]

BACKENDS: dict[str, str] = {
    "memory": "hubstore.memory",
    "postgres": "hubstore.postgres.store",
    "postgresql": "hubstore.postgres.store",
    "sqlite": "hubstore.sqlite.store",
}
"""Hub URL scheme -> the module implementing that backend."""

DRIVERS: dict[str, tuple[str, str, frozenset[str]]] = {
    "hubstore.postgres.store": ("PostgreSQL", "postgres", frozenset({"psycopg", "psycopg_pool"})),
}
"""Backend module -> what it needs that hubsync may be installed without: the database's
name, the extra that installs its driver, and the driver's top-level packages."""


class Backend(Protocol):
    """What a backend module provides to ``open_store``."""

    def open_hub_store(
        self, url: str, *, create_schema: bool, busy_budget: float | None
    ) -> HubStore:
        """Open (and with ``create_schema``, create the schema of) the store ``url`` names."""
        ...

    def migrate_hub_store(self, url: str, *, busy_budget: float | None) -> SchemaChange:
        """Create or upgrade the schema of the store ``url`` names; say what was done."""
        ...


def url_scheme(url: str) -> str:
    """The backend scheme of a hub URL; ``ConfigError`` naming the known ones otherwise."""
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        scheme = ""
    if "://" not in url or scheme not in BACKENDS:
        raise ConfigError(
            f"hub URL {shown_url(url)[:80]!r} names no known store; known schemes: "
            f"{', '.join(f'{s}://' for s in sorted(BACKENDS))} (e.g. sqlite:///path/to/hub.db)"
        )
    return scheme


def open_store(url: str, *, create_schema: bool, busy_budget: float | None = None) -> HubStore:
    """The hub store ``url`` names (see the module docstring for the URL forms).

    ``create_schema=True`` creates a missing database and schema (idempotent);
    False opens an existing one only, and refuses a missing one with
    ``SchemaVersionError``. ``busy_budget`` caps, in seconds, how long one
    operation retries a store locked by other writers (None: the backend's
    default). Raises ``ConfigError`` for a malformed URL or unknown scheme.
    """
    return _backend(url).open_hub_store(url, create_schema=create_schema, busy_budget=busy_budget)


def migrate_store(url: str, *, busy_budget: float | None = None) -> SchemaChange:
    """Create the schema of the hub store ``url`` names, or upgrade an older one (idempotent).

    The one step that writes a schema apart from ``open_store(url,
    create_schema=True)``: ``hubsync hub migrate``. A SQLite file is copied to
    ``<file>.v<old>.bak`` before an upgrade. Returns what was done (created,
    upgraded from which version, or already current); raises
    ``SchemaVersionError`` for a newer version, left untouched.
    """
    return _backend(url).migrate_hub_store(url, busy_budget=busy_budget)


def _backend(url: str) -> Backend:
    module = BACKENDS[url_scheme(url)]
    try:
        return cast(Backend, importlib.import_module(module))
    except ImportError as exc:
        database, extra, packages = DRIVERS.get(module, ("", "", frozenset()))
        missing = (exc.name or "").partition(".")[0]
        if missing not in packages:
            raise  # not a driver left out at install time: a real fault, with its traceback
        raise MissingDependencyError(
            f"hub URL {shown_url(url)}: the {database} driver ({missing}) is not installed; "
            f"install it with: pip install 'hubsync[{extra}]'"
        ) from None


def shown_url(url: str) -> str:
    """``url`` as messages show it: any password (``user:secret@``, ``?password=``) as ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    masked = parts
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if at and ":" in userinfo:
        masked = masked._replace(netloc=f"{userinfo.partition(':')[0]}:***@{hosts}")
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(name.lower() == "password" for name, _ in query):
        shown = [(name, "***" if name.lower() == "password" else value) for name, value in query]
        masked = masked._replace(query=urlencode(shown, safe="*", quote_via=quote))
    return url if masked is parts else unsplit_url(masked)


def unsplit_url(parts: SplitResult) -> str:
    """``parts`` as a URL, keeping ``//`` before an empty host (``sqlite:///path``,
    ``postgresql:///db?host=/run/postgresql``), which ``geturl()`` drops."""
    url = f"{parts.scheme}://{parts.netloc}{parts.path}"
    if parts.query:
        url += f"?{parts.query}"
    if parts.fragment:
        url += f"#{parts.fragment}"
    return url
