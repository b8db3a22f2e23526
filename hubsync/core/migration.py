"""Schema versions and migrations, apart from any one database.

Every database hubsync keeps records the version of its schema and is brought
up to date by numbered, forward-only steps: the SQLite files through
``hubsync.core.sqlite.Database.ensure_schema`` (version in ``PRAGMA user_version``),
the PostgreSQL hub store through ``hubstore.postgres.schema`` (version in a
table). What they share is here:

* ``Migration``: one step from version N to N+1, SQL statements or a function
  of the connection, run inside the caller's transaction;
* ``check_migrations``: the steps are numbered one after another up to the
  current version;
* ``SchemaChange``: what bringing a schema up to date did (created, upgraded,
  current), what ``hubsync hub migrate`` reports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


class Executes(Protocol):
    """A database connection that runs one SQL statement (sqlite3's and psycopg's both do)."""

    def execute(self, statement: str, /) -> object:
        """Run ``statement``."""
        ...


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered, forward-only schema step: ``from_version`` to ``from_version + 1``.

    ``change`` is the SQL statements to run in order, or a callable given the
    connection (to rewrite rows, say). Every step of an upgrade runs inside one
    transaction: a step must not commit, and a failing one leaves the database
    as it was. ``summary`` says what the step does, for the operator.
    """

    from_version: int
    summary: str
    change: Sequence[str] | Callable[[Any], None]

    def __post_init__(self) -> None:
        if isinstance(self.change, str):
            raise TypeError("Migration.change takes a sequence of statements, not one string")

    def apply(self, connection: Executes) -> None:
        """Run this step on ``connection``, inside the caller's transaction."""
        if callable(self.change):
            self.change(connection)
            return
        for statement in self.change:
            connection.execute(statement)


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """What bringing a database's schema up to date did.

    ``from_version`` 0 is a schema created here; equal versions, a schema
    already current. An upgrade names the summaries of the steps it ran and,
    for a file, the copy of it taken before (``backup``; None where the
    database keeps no such copy).
    """

    from_version: int
    to_version: int
    backup: Path | None = None
    steps: tuple[str, ...] = ()

    @property
    def action(self) -> str:
        """``created``, ``upgraded`` or ``current``."""
        if self.from_version == self.to_version:
            return "current"
        return "created" if self.from_version == 0 else "upgraded"


def check_migrations(migrations: Sequence[Migration], version: int) -> None:
    """Refuse (``ValueError``) steps that are not numbered one after another up to ``version``."""
    expected = [version - len(migrations) + i for i in range(len(migrations))]
    found = [m.from_version for m in migrations]
    if found != expected or (migrations and expected[0] < 1):
        raise ValueError(
            f"migrations must go one version at a time up to {version}; they start from {found}"
        )


def steps_from(found: int, version: int, migrations: Sequence[Migration]) -> list[Migration] | None:
    """The steps that bring version ``found`` to ``version``; None if no step starts there."""
    steps = [m for m in migrations if m.from_version >= found]
    return steps if len(steps) == version - found else None
