"""The store checks: the hub store and the runtime's state dir open, at this hubsync's schema,
their SQLite files are undamaged, and the files holding keys are private.

Nothing is created: a missing hub database or state dir fails its check, and a
registered project whose store file does not exist yet (nothing appended) is
reported as such rather than opened. Each SQLite file that opens is read whole
by ``PRAGMA quick_check``: a damaged page elsewhere than the schema lets the file
open and fails only the query that reaches it, maybe hours later in a daemon.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from hubsync.core.errors import ConfigError, HubsyncError, SchemaVersionError
from hubsync.core.private_files import exposure
from hubsync.core.sqlite import companion_files, damage_found
from hubsync.doctor.check import Check, Status, counted, from_error

if TYPE_CHECKING:
    from producers.registry import ProjectRegistration, RuntimeRegistry

STORE_BUSY_BUDGET = 10.0
"""Seconds a check waits for a store locked by a writer before failing its line."""

_OPEN_ERRORS = (HubsyncError, sqlite3.Error, OSError)


def hub_store_check(hub_url: str | None, shown: str) -> Check:
    """The hub store opens without being created, at this hubsync's schema version.

    ``shown`` is the store as shown to people (a path, or the URL without credentials).
    """
    if hub_url is None:
        return Check("hub-store", Status.SKIP, "no --hub-url or --hub-db given")
    from hubstore import open_store

    try:
        store = open_store(hub_url, create_schema=False, busy_budget=STORE_BUSY_BUDGET)
    except SchemaVersionError as exc:
        # the store's own message says what to run (hubsync hub migrate ...)
        return from_error("hub-store", exc, f"check {shown}")
    except _OPEN_ERRORS as exc:
        return _failed("hub-store", exc, shown, f"check {shown} and its permissions")
    store.close()
    path = sqlite_path(hub_url)
    if path is not None:
        damaged = _damage_check("hub-store", path)
        if damaged is not None:
            return damaged
    return Check("hub-store", Status.OK, f"{shown} opens, at this hubsync's schema version")


def sqlite_path(hub_url: str) -> Path | None:
    """The file of a ``sqlite:///`` hub URL (by the backend's own rule); None for another."""
    from hubstore.factory import url_scheme
    from hubstore.sqlite.store import sqlite_path as backend_sqlite_path

    try:
        return backend_sqlite_path(hub_url) if url_scheme(hub_url) == "sqlite" else None
    except ConfigError:
        return None  # the hub-store line has said what is wrong with the URL


_RESTORE_FIX = (
    "stop what writes it, restore it from a backup, or save what is readable with "
    "`sqlite3 FILE .recover | sqlite3 NEW` and put NEW in its place"
)


def _damage_check(name: str, path: Path) -> Check | None:
    """A failed check naming ``path`` when ``PRAGMA quick_check`` finds damage in it, else None."""
    try:
        damage = damage_found(path, STORE_BUSY_BUDGET)
    except _OPEN_ERRORS as exc:
        return _failed(name, exc, str(path), _ACCESS_FIX)
    if not damage:
        return None
    more = f" (+{len(damage) - 1} more)" if len(damage) > 1 else ""
    return Check(
        name,
        Status.FAIL,
        f"{path}: PRAGMA quick_check found damage: {damage[0][:200]}{more}",
        _RESTORE_FIX.replace("FILE", str(path)),
    )


KEY_RISK = "who reads a key can sign events as its runtime"


def key_files_check(
    name: str, path: Path | None, holds: str, skipped: str, risk: str = KEY_RISK
) -> Check:
    """``path`` (a SQLite file holding keys) and its -wal, -shm, -journal and backups are
    private regular files: FAIL on a symbolic link in the place of one (which hubsync refuses
    to open), or on one group or others have any access to, saying ``chmod 600`` on it.

    ``holds`` says what keys, for the message, and ``risk`` what reading them allows.
    Who can read the file can sign events as the runtimes whose keys it holds
    (a project's store: read its events): hubsync creates them 0600 and
    tightens a wider mode when it opens one, so another mode is an operator's
    copy or chmod since. ``skipped`` says why there is nothing to check when
    ``path`` is None. Looks with ``lstat`` only: nothing is followed or changed.
    """
    if path is None:
        return Check(name, Status.SKIP, skipped)
    if not os.path.lexists(path):
        return Check(name, Status.SKIP, f"no file {path}")
    found = [problem for file in companion_files(path) if (problem := exposure(file))]
    if not found:
        return Check(name, Status.OK, f"{path} is private (no access for group or others)")
    shown = ", ".join(str(problem) for problem in found)
    links = [problem.path for problem in found if problem.kind != "mode"]
    if links:
        return Check(
            name,
            Status.FAIL,
            f"{shown}: hubsync never opens {holds} through a link",
            f"put the file itself in place of {' '.join(str(p) for p in links)}",
        )
    return Check(
        name,
        Status.FAIL,
        f"{shown}: group or others may read {holds} ({risk})",
        f"chmod 600 {' '.join(str(problem.path) for problem in found)}",
    )


def store_identity(hub_url: str, shown: str) -> tuple[str, str | None] | None:
    """``(shown, hub id or None)`` of the store ``hub_url`` names; None if it cannot be
    opened (``hub_store_check`` reports why)."""
    from hubstore import open_store

    try:
        with open_store(hub_url, create_schema=False, busy_budget=STORE_BUSY_BUDGET) as store:
            return shown, store.hub_id()
    except _OPEN_ERRORS:
        return None


def store_commit_counter(hub_url: str) -> int | None:
    """The commit counter of the store ``hub_url`` names; None if it cannot be read
    (``hub_store_check`` reports why)."""
    from hubstore import open_store

    try:
        with open_store(hub_url, create_schema=False, busy_budget=STORE_BUSY_BUDGET) as store:
            return store.commit_counter()
    except _OPEN_ERRORS:
        return None


def state_dir_checks(state_dir: Path | None) -> list[Check]:
    """The runtime's registry opens, then one check per registered project: does its store open."""
    if state_dir is None:
        return [Check("state-dir", Status.SKIP, "no --state-dir given")]
    from producers.registry import RuntimeRegistry

    try:
        registry = RuntimeRegistry(state_dir, create=False)
    except _OPEN_ERRORS as exc:
        return [_failed("state-dir", exc, f"{state_dir} (its registry)", _ACCESS_FIX)]
    with registry:
        try:
            projects = registry.projects()
        except _OPEN_ERRORS as exc:
            return [_failed("state-dir", exc, f"{state_dir} (its registry)", _ACCESS_FIX)]
        found = _damage_check("state-dir", registry.path) or Check(
            "state-dir",
            Status.OK,
            f"{registry.state_dir}: runtime {registry.runtime_id}, "
            f"{counted(len(projects), 'project')}",
        )
        return [found, *(_project_check(registry, p) for p in projects)]


_ACCESS_FIX = (
    "check that it is this runtime's file and that this user may read and write it, "
    "as the relay does"
)


def _project_check(registry: RuntimeRegistry, project: ProjectRegistration) -> Check:
    name = f"project {project.project_id}"
    where = f"hub project {project.hub_project}, store {project.store_path}"
    if not os.path.lexists(project.store_path):
        # Opening would create it; a project with nothing appended has no store yet.
        return Check(name, Status.OK, f"{where}: no store yet (nothing appended)")
    try:
        with registry.open_store(project, busy_budget=STORE_BUSY_BUDGET) as store:
            counts = store.outbox_counts()
    except _OPEN_ERRORS as exc:
        return _failed(name, exc, f"store {project.store_path}", _ACCESS_FIX)
    damaged = _damage_check(name, project.store_path)
    if damaged is not None:
        return damaged
    private = key_files_check(
        name, project.store_path, "its events", "", "with anything redaction missed in them"
    )
    if private.failed:
        return private
    states = ", ".join(f"{counts[s]} {s}" for s in ("pending", "acked", "conflict", "rejected"))
    return Check(name, Status.OK, f"{where}: opens; outbox {states}")


def _failed(name: str, exc: BaseException, where: str, fix: str) -> Check:
    """A failed open: hubsync's own message names the file; a driver's gets ``where`` first."""
    if isinstance(exc, HubsyncError):
        return from_error(name, exc, fix)
    return Check(name, Status.FAIL, f"{where}: {exc}", fix)
