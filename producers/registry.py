"""The runtime registry: who this runtime is, and which projects call it home.

``<state_dir>/registry.sqlite`` records the runtime id (generated once as
``rt-<host>-<8 hex>``, or the one given at first open; never changed after)
and binds each project root to a project id, a hub project and this runtime as
its home, with the path of the project's event store
(``<state_dir>/stores/<project id>.sqlite``). Bindings never change: asking
for the same root with another hub project or project id, or opening the state
dir as another runtime, is refused with ``RebindError``. The relay lists
``projects()`` at start (restart recovery) and again periodically.

Since schema version 2 it also keeps this runtime's enrollment on its hub
(``join``, from the token ``hubsync enroll`` printed; ``enrollment()``): the
hub id, the runtime's key and the hub projects it may write to. The file is
private (0600), as every SQLite file hubsync creates, because it holds the key; it is
never opened through a symbolic link, and a wider mode found on it is tightened
(``hubsync.core.private_files``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import socket
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hubsync.core.clock import utc_now_iso
from hubsync.core.closing import ClosesOnExit
from hubsync.core.enrollment import Enrollment
from hubsync.core.names import MAX_NAME_LENGTH, validate_name
from hubsync.core.sqlite import Database, Migration, split_statements
from producers.derivation import StoreIdentity
from producers.errors import (
    ForeignEnrollmentError,
    ProducerError,
    RebindError,
    RegistryDamagedError,
    StateDirAccessError,
    StateDirNotFoundError,
)

if TYPE_CHECKING:
    # Imported when a store is opened: reading the runtime id (relay --check) needs none.
    from producers.store.event_store import RunEventStore

REGISTRY_SCHEMA_VERSION = 2
"""``PRAGMA user_version`` of ``registry.sqlite``: an older file is migrated at open (after a
backup), a newer one refused."""

# One row at most (slot 1): a runtime is enrolled on one hub. The key is kept as
# it is, since the relay signs with it; the file is 0600.
ENROLLMENT_DDL = """
CREATE TABLE enrollment (
  slot INTEGER PRIMARY KEY CHECK (slot = 1),
  hub_id TEXT NOT NULL,
  runtime_id TEXT NOT NULL,
  hub_projects TEXT NOT NULL,
  key BLOB NOT NULL,
  joined_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
"""

REGISTRY_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        from_version=1,
        summary="add enrollment (the hub id, this runtime's key and its hub projects)",
        change=split_statements(ENROLLMENT_DDL),
    ),
)
"""Version N -> N+1 steps, oldest first (``hubsync.core.sqlite.Migration``)."""

REGISTRY_FILE = "registry.sqlite"
STORES_DIR = "stores"

REGISTRY_DDL = (
    """
CREATE TABLE registry_meta (
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE projects (
  position INTEGER PRIMARY KEY,
  project_id TEXT NOT NULL UNIQUE,
  project_root TEXT NOT NULL UNIQUE,
  hub_project TEXT NOT NULL,
  home_runtime_id TEXT NOT NULL,
  store_path TEXT NOT NULL,
  registered_at TEXT NOT NULL
);
"""
    + ENROLLMENT_DDL
)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_FILE_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True, slots=True)
class ProjectRegistration:
    """One project bound to its home runtime."""

    project_id: str
    project_root: Path
    hub_project: str
    home_runtime_id: str
    store_path: Path
    registered_at: str

    @property
    def identity(self) -> StoreIdentity:
        """The ids its sync events carry."""
        return StoreIdentity(self.project_id, self.hub_project, self.home_runtime_id)


class JoinAction(StrEnum):
    """What ``RuntimeRegistry.join`` did."""

    JOINED = "joined"
    """The runtime had no enrollment: it now has this one."""
    UPDATED = "updated"
    """The same hub gave a new key or other hub projects: they replace the old ones."""
    UNCHANGED = "unchanged"
    """The registry held exactly this enrollment already."""


def sanitized_name(text: str, fallback: str = "project") -> str:
    """``text`` made into a valid id: unsafe runs become ``-``, trimmed to the length limit."""
    name = _UNSAFE.sub("-", text).strip("-._")[: MAX_NAME_LENGTH - 16].strip("-._")
    return name or fallback


def generate_runtime_id() -> str:
    """A fresh runtime id: ``rt-<host>-<8 hex>``."""
    host = sanitized_name(socket.gethostname().split(".")[0].lower(), "host")[:40]
    return f"rt-{host}-{secrets.token_hex(4)}"


def _store_file_name(project_id: str) -> str:
    if _FILE_SAFE.fullmatch(project_id) and len(project_id) <= 100:
        return f"{project_id}.sqlite"
    # Ids may hold '/', ':' ...: keep a readable stem and make it unique with a hash.
    digest = hashlib.sha256(project_id.encode()).hexdigest()[:12]
    return f"{sanitized_name(project_id)[:80]}-{digest}.sqlite"


class RuntimeRegistry(ClosesOnExit):
    """The registry of one runtime's state directory."""

    def __init__(
        self, state_dir: Path | str, runtime_id: str | None = None, *, create: bool = True
    ) -> None:
        """Open the registry; ``runtime_id`` must match a recorded one.

        With ``create`` (registration) a missing state dir and registry are
        created; without it (the relay, status) a state dir holding no registry
        is refused with ``StateDirNotFoundError``: a mistyped path must not
        become a new, empty runtime. A state dir or registry this user cannot
        create or open raises ``StateDirAccessError``, a registry that is not
        a SQLite database ``RegistryDamagedError``; neither writes anything.
        """
        self.state_dir = Path(state_dir).expanduser().resolve()
        if runtime_id is not None:
            validate_name(runtime_id, "runtime id")
        # lexists: a link in the registry's place is refused by name when opened, not taken
        # for a missing file
        if not create and not os.path.lexists(self.state_dir / REGISTRY_FILE):
            raise StateDirNotFoundError(
                f"{str(state_dir)!r} is not a hubsync state dir (no {REGISTRY_FILE} in it); "
                "fix the path, or create the runtime there first (hubsync runtime join with "
                "the token hubsync enroll printed, or hubsync produce --create)"
            )
        path = self.state_dir / REGISTRY_FILE
        try:
            self._db = Database(path)
        except (OSError, sqlite3.DatabaseError) as exc:
            raise _open_failure(exc, path) from exc
        try:
            self._db.ensure_schema(
                REGISTRY_SCHEMA_VERSION,
                split_statements(REGISTRY_DDL),
                "hubsync runtime registry",
                REGISTRY_MIGRATIONS,
            )
            self._runtime_id = self._bind_runtime(runtime_id)
        except (OSError, sqlite3.DatabaseError) as exc:
            self._db.close()
            raise _open_failure(exc, path) from exc
        except BaseException:
            self._db.close()
            raise

    @property
    def runtime_id(self) -> str:
        """This runtime's id (fixed for the life of the state dir)."""
        return self._runtime_id

    @property
    def path(self) -> Path:
        """The registry file."""
        return self._db.path

    def close(self) -> None:
        """Close the registry file (idempotent)."""
        self._db.close()

    def register_project(
        self,
        project_root: Path | str,
        hub_project: str | None = None,
        project_id: str | None = None,
    ) -> ProjectRegistration:
        """Bind ``project_root`` to this runtime, or return its existing binding.

        Idempotent for the same root. Defaults: the hub project is the root's
        sanitised basename; the project id is that name plus 8 random hex
        digits. Raises ``RebindError`` if the root is bound to another hub
        project, project id or home runtime, or ``project_id`` to another root.
        """
        root = Path(project_root).expanduser().resolve()
        if hub_project is not None:
            validate_name(hub_project, "hub project")
        if project_id is not None:
            validate_name(project_id, "project id")

        def register(c: sqlite3.Connection) -> ProjectRegistration:
            existing = self._row(c, "project_root", str(root))
            if existing is not None:
                self._check_same(existing, hub_project, project_id)
                return existing
            chosen_id = project_id or f"{sanitized_name(root.name)}-{secrets.token_hex(4)}"
            taken = self._row(c, "project_id", chosen_id)
            if taken is not None:
                raise RebindError(
                    f"project id {chosen_id} is already bound to {taken.project_root}; "
                    "a project id belongs to one project root"
                )
            store = Path(STORES_DIR) / _store_file_name(chosen_id)
            c.execute(
                "INSERT INTO projects (project_id, project_root, hub_project, home_runtime_id, "
                "store_path, registered_at) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    chosen_id,
                    str(root),
                    hub_project or sanitized_name(root.name),
                    self._runtime_id,
                    str(store),
                    utc_now_iso(),
                ),
            )
            row = self._row(c, "project_id", chosen_id)
            assert row is not None
            return row

        return self._db.write(register)

    def projects(self) -> list[ProjectRegistration]:
        """This runtime's projects in registration order (for the relay's restart recovery)."""
        return self._db.read(
            lambda c: [
                self._registration(row)
                for row in c.execute(
                    f"SELECT {_COLUMNS} FROM projects WHERE home_runtime_id = ? ORDER BY position",
                    (self._runtime_id,),
                ).fetchall()
            ]
        )

    def project(self, project_id: str) -> ProjectRegistration | None:
        """The registration of ``project_id``, if any."""
        return self._db.read(lambda c: self._row(c, "project_id", project_id))

    def project_for_root(self, project_root: Path | str) -> ProjectRegistration | None:
        """The registration of a project root, if any."""
        root = Path(project_root).expanduser().resolve()
        return self._db.read(lambda c: self._row(c, "project_root", str(root)))

    def join(self, enrollment: Enrollment) -> JoinAction:
        """Keep ``enrollment`` (from ``hubsync enroll``'s token) as this runtime's, replacing the
        key and hub projects of an earlier enrollment on the same hub.

        Refuses (``ForeignEnrollmentError``) an enrollment of another runtime id,
        or from another hub than the one this runtime joined: a runtime syncs
        with one hub. The messages name ids only, never the key.
        """
        if enrollment.runtime_id != self._runtime_id:
            raise ForeignEnrollmentError(
                f"this enrollment token is for runtime {enrollment.runtime_id}, but the state "
                f"dir {self.state_dir} belongs to runtime {self._runtime_id}; enroll "
                f"{self._runtime_id} on the hub (hubsync enroll {self._runtime_id} ...) and join "
                "with the token it prints"
            )

        def keep(c: sqlite3.Connection) -> JoinAction:
            now = utc_now_iso()
            current = self._enrollment(c)
            if current is None:
                c.execute(
                    "INSERT INTO enrollment (slot, hub_id, runtime_id, hub_projects, key, "
                    "joined_at, updated_at) VALUES (1, ?, ?, ?, ?, ?, ?)",
                    (*_enrollment_row(enrollment), now, now),
                )
                return JoinAction.JOINED
            if current.hub_id != enrollment.hub_id:
                raise ForeignEnrollmentError(
                    f"the state dir {self.state_dir} is joined to hub {current.hub_id}; this "
                    f"token is from hub {enrollment.hub_id}. A runtime syncs with one hub: "
                    "use another state dir for the other hub"
                )
            if current == enrollment:
                return JoinAction.UNCHANGED
            c.execute(
                "UPDATE enrollment SET hub_projects = ?, key = ?, updated_at = ? WHERE slot = 1",
                (*_enrollment_row(enrollment)[2:], now),
            )
            return JoinAction.UPDATED

        return self._db.write(keep)

    def enrollment(self) -> Enrollment | None:
        """This runtime's enrollment on its hub (key included), or None before it joined one."""
        return self._db.read(self._enrollment)

    def open_store(self, registration: ProjectRegistration, **options: Any) -> RunEventStore:
        """Open (creating if needed) the project's event store; ``options`` go to the store.

        Paths in payloads are made relative to the registered project root (unless
        ``options`` bring a ``redactor``, which carries its own).
        """
        if registration.home_runtime_id != self._runtime_id:
            raise RebindError(
                f"project {registration.project_id} calls runtime {registration.home_runtime_id} "
                f"home, not this runtime ({self._runtime_id})"
            )
        from producers.store.event_store import RunEventStore

        if "redactor" not in options:
            options.setdefault("project_root", registration.project_root)
        return RunEventStore(registration.store_path, registration.identity, **options)

    def _bind_runtime(self, wanted: str | None) -> str:
        def bind(c: sqlite3.Connection) -> str:
            row = c.execute("SELECT value FROM registry_meta WHERE name = 'runtime_id'").fetchone()
            if row is not None:
                return str(row[0])
            chosen = wanted or generate_runtime_id()
            c.execute(
                "INSERT INTO registry_meta (name, value) VALUES ('runtime_id', ?), "
                "('created_at', ?)",
                (chosen, utc_now_iso()),
            )
            return chosen

        recorded = self._db.write(bind)
        if wanted is not None and wanted != recorded:
            raise RebindError(
                f"the state dir {self.state_dir} belongs to runtime {recorded}; refusing to open "
                f"it as runtime {wanted} (a runtime id never changes: drop --runtime-id or use "
                "another state dir)"
            )
        return recorded

    def _check_same(
        self, existing: ProjectRegistration, hub_project: str | None, project_id: str | None
    ) -> None:
        problems: Mapping[str, tuple[str | None, str]] = {
            "hub project": (hub_project, existing.hub_project),
            "project id": (project_id, existing.project_id),
        }
        for what, (asked, recorded) in problems.items():
            if asked is not None and asked != recorded:
                raise RebindError(
                    f"{existing.project_root} is bound to {what} {recorded}; refusing to rebind "
                    f"it to {asked} (bindings never change: use the recorded {what})"
                )
        if existing.home_runtime_id != self._runtime_id:
            raise RebindError(
                f"{existing.project_root} calls runtime {existing.home_runtime_id} home; "
                f"refusing to rebind it to runtime {self._runtime_id}"
            )

    @staticmethod
    def _enrollment(c: sqlite3.Connection) -> Enrollment | None:
        row = c.execute(
            "SELECT hub_id, runtime_id, hub_projects, key FROM enrollment WHERE slot = 1"
        ).fetchone()
        if row is None:
            return None
        hub_id, runtime_id, hub_projects, key = row
        return Enrollment(hub_id, runtime_id, tuple(json.loads(hub_projects)), bytes(key))

    def _row(self, c: sqlite3.Connection, column: str, value: str) -> ProjectRegistration | None:
        row = c.execute(f"SELECT {_COLUMNS} FROM projects WHERE {column} = ?", (value,)).fetchone()
        return None if row is None else self._registration(row)

    def _registration(self, row: tuple[Any, ...]) -> ProjectRegistration:
        project_id, root, hub_project, home, store, registered_at = row
        return ProjectRegistration(
            project_id=project_id,
            project_root=Path(root),
            hub_project=hub_project,
            home_runtime_id=home,
            store_path=self.state_dir / store,
            registered_at=registered_at,
        )


def _open_failure(exc: OSError | sqlite3.DatabaseError, path: Path) -> ProducerError:
    """The one-line error for a registry that cannot be created or opened.

    The OS's and SQLite's own messages name neither the file nor what to do.
    """
    if isinstance(exc, OSError):
        where = f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc)
        nearest = _nearest_existing(path)
        fix = (
            f"fix the permissions of {nearest}"
            if nearest.is_dir()
            else f"{nearest} is a file, not a directory"
        )
        return StateDirAccessError(
            f"cannot create the runtime registry {path} ({where}); give --state-dir a directory "
            f"this user can create and write, or {fix}"
        )
    if isinstance(exc, sqlite3.OperationalError):  # "unable to open", "readonly database"
        return StateDirAccessError(
            f"cannot open the runtime registry {path} ({exc}); check that this user may read and "
            f"write it and its directory {path.parent}"
        )
    return RegistryDamagedError(
        f"the runtime registry {path} is not a readable SQLite database ({exc}); it was left "
        "untouched: restore it from a backup, or move the state dir aside and set the runtime "
        "up again (hubsync runtime join)"
    )


def _nearest_existing(path: Path) -> Path:
    """The closest ancestor of ``path`` that exists (whose permissions decide what can be made)."""
    return next((parent for parent in path.parents if parent.exists()), Path("/"))


def _enrollment_row(enrollment: Enrollment) -> tuple[str, str, str, bytes]:
    return (
        enrollment.hub_id,
        enrollment.runtime_id,
        json.dumps(list(enrollment.hub_projects)),
        enrollment.key,
    )


_COLUMNS = "project_id, project_root, hub_project, home_runtime_id, store_path, registered_at"
