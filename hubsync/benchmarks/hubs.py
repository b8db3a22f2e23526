"""Where the bench's hub consumers write: a temp SQLite file, or PostgreSQL.

Each end-to-end or latency measurement needs a new, empty hub store. Without a
hub URL it is ``hub.db`` in the measurement's temp directory; with a
``postgresql://`` URL (``hubsync bench --hub-url``) it is a new schema of that
database (``hubsync_bench_<hex>``), dropped with its tables afterwards, so the
database itself is never changed and several runs never meet.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hubstore.factory import open_store, shown_url, url_scheme
from hubsync.core.errors import ConfigError, SchemaVersionError
from hubsync.core.settings import hub_url_from_path

POSTGRES_SCHEMES = ("postgresql", "postgres")


def check_bench_hub_url(hub_url: str) -> None:
    """Refuse (``ConfigError``) a hub URL the bench cannot make fresh stores in."""
    if url_scheme(hub_url) not in POSTGRES_SCHEMES:
        raise ConfigError(
            f"--hub-url {shown_url(hub_url)!r}: the bench takes a postgresql:// database to make "
            "its hub stores in (without --hub-url they are temp SQLite files)"
        )


@contextmanager
def bench_hub(directory: Path, hub_url: str | None) -> Iterator[str]:
    """The URL of a new, empty hub store for one measurement, removed afterwards."""
    if hub_url is None:
        yield hub_url_from_path(directory / "hub.db")
        return
    check_bench_hub_url(hub_url)
    from hubstore.postgres.store import scratch_schema  # psycopg: only with a PostgreSQL hub

    with scratch_schema(hub_url, "hubsync_bench") as url:
        yield url


def hub_kind(hub_url: str | None) -> str:
    """``sqlite`` or ``postgresql``: what the report says the hub was."""
    return "sqlite" if hub_url is None else "postgresql"


def hub_rows(url: str) -> int:
    """Events stored in the hub store at ``url`` so far (0 before its schema exists)."""
    try:
        with open_store(url, create_schema=False, busy_budget=10.0) as store:
            return store.count_events()
    except SchemaVersionError:
        return 0
