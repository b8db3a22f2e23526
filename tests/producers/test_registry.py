"""The runtime registry: a fixed runtime id, immutable project bindings, restart listing."""

from __future__ import annotations

import os
import re
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from hubsync.core.enrollment import Enrollment, new_key
from hubsync.core.errors import ConfigError, SchemaVersionError
from producers.errors import ForeignEnrollmentError, RebindError, StateDirNotFoundError
from producers.registry import (
    REGISTRY_FILE,
    REGISTRY_SCHEMA_VERSION,
    JoinAction,
    RuntimeRegistry,
    sanitized_name,
)


def test_a_runtime_id_is_generated_once_and_kept(tmp_path: Path) -> None:
    with RuntimeRegistry(tmp_path) as first:
        runtime_id = first.runtime_id
    assert re.fullmatch(r"rt-[a-z0-9.-]+-[0-9a-f]{8}", runtime_id)
    with RuntimeRegistry(tmp_path) as again:
        assert again.runtime_id == runtime_id
    with RuntimeRegistry(tmp_path, runtime_id) as explicit:
        assert explicit.runtime_id == runtime_id


def test_an_explicit_runtime_id_names_a_new_state_dir(tmp_path: Path) -> None:
    with RuntimeRegistry(tmp_path, "rt-build-7") as registry:
        assert registry.runtime_id == "rt-build-7"


def test_opening_a_state_dir_as_another_runtime_is_refused(tmp_path: Path) -> None:
    RuntimeRegistry(tmp_path, "rt-one").close()
    with pytest.raises(RebindError, match="belongs to runtime rt-one"):
        RuntimeRegistry(tmp_path, "rt-two")


def test_a_malformed_runtime_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        RuntimeRegistry(tmp_path, "rt {bad}")


def test_registering_a_root_is_idempotent(tmp_path: Path) -> None:
    with RuntimeRegistry(tmp_path / "state") as registry:
        first = registry.register_project(tmp_path / "shop")
        again = registry.register_project(tmp_path / "x" / ".." / "shop")
        same_explicit = registry.register_project(
            tmp_path / "shop", hub_project=first.hub_project, project_id=first.project_id
        )
        assert first == again == same_explicit
        assert registry.projects() == [first]


def test_defaults_derive_from_the_root_name(tmp_path: Path) -> None:
    with RuntimeRegistry(tmp_path / "state", "rt-a") as registry:
        registration = registry.register_project(tmp_path / "My Shop!")
    assert registration.hub_project == "My-Shop"
    assert re.fullmatch(r"My-Shop-[0-9a-f]{8}", registration.project_id)
    assert registration.home_runtime_id == "rt-a"
    assert registration.project_root == (tmp_path / "My Shop!").resolve()
    assert registration.store_path.parent == (tmp_path / "state" / "stores").resolve()


def test_sanitized_names_are_valid_ids() -> None:
    assert sanitized_name("...") == "project"
    assert sanitized_name("a b/c") == "a-b-c"
    assert sanitized_name("_x_") == "x"


def test_rebinding_a_root_to_another_hub_project_or_id_is_refused(tmp_path: Path) -> None:
    with RuntimeRegistry(tmp_path / "state") as registry:
        registration = registry.register_project(tmp_path / "shop", hub_project="acme")
        with pytest.raises(RebindError, match="bound to hub project acme"):
            registry.register_project(tmp_path / "shop", hub_project="other")
        with pytest.raises(RebindError, match="bound to project id"):
            registry.register_project(tmp_path / "shop", project_id="shop-2")
        assert registry.projects() == [registration]


def test_a_project_id_belongs_to_one_root(tmp_path: Path) -> None:
    with RuntimeRegistry(tmp_path / "state") as registry:
        registry.register_project(tmp_path / "a", project_id="proj-x")
        with pytest.raises(RebindError, match="already bound"):
            registry.register_project(tmp_path / "b", project_id="proj-x")


def test_projects_are_listed_in_registration_order_across_reopens(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with RuntimeRegistry(state) as registry:
        names = ["zeta", "alpha", "mid"]
        for name in names:
            registry.register_project(tmp_path / name)
    with RuntimeRegistry(state) as reopened:
        assert [p.project_root.name for p in reopened.projects()] == names
        assert reopened.project_for_root(tmp_path / "alpha") == reopened.projects()[1]
        assert reopened.project(reopened.projects()[2].project_id) == reopened.projects()[2]
        assert reopened.project("nope") is None


def test_open_store_binds_the_store_to_the_registration(tmp_path: Path) -> None:
    with RuntimeRegistry(tmp_path / "state", "rt-a") as registry:
        registration = registry.register_project(
            tmp_path / "shop", hub_project="acme", project_id="a/b:c"
        )
        with registry.open_store(registration, environ={}) as store:
            appended = store.append_event("run-1", "run.started", {})
            assert (store.project_id, store.hub_project, store.home_runtime_id) == (
                "a/b:c",
                "acme",
                "rt-a",
            )
        assert registration.store_path.exists()
        assert registration.store_path.parent.name == "stores"
        with registry.open_store(registration, environ={}) as reopened:
            assert reopened.last_sequence("run-1") == appended.sequence


def test_a_registry_of_a_newer_schema_version_is_refused(tmp_path: Path) -> None:
    RuntimeRegistry(tmp_path).close()
    newer = REGISTRY_SCHEMA_VERSION + 1
    with sqlite3.connect(tmp_path / REGISTRY_FILE) as connection:
        connection.execute(f"PRAGMA user_version = {newer}")
    connection.close()
    with pytest.raises(
        SchemaVersionError, match=f"schema version {newer}, newer than this hubsync"
    ):
        RuntimeRegistry(tmp_path)


def test_opening_without_create_refuses_a_state_dir_with_no_registry(tmp_path: Path) -> None:
    with pytest.raises(StateDirNotFoundError, match="not a hubsync state dir"):
        RuntimeRegistry(tmp_path / "typo", create=False)
    assert not (tmp_path / "typo").exists()
    with RuntimeRegistry(tmp_path / "state") as created:
        runtime_id = created.runtime_id
    with RuntimeRegistry(tmp_path / "state", create=False) as opened:
        assert opened.runtime_id == runtime_id


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    """A umask that would leave new files world-readable, to show the modes do not depend on it."""
    previous = os.umask(0o000)
    try:
        yield
    finally:
        os.umask(previous)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.usefixtures("permissive_umask")
def test_a_state_dir_its_stores_and_their_files_are_private_to_the_owner(tmp_path: Path) -> None:
    state_dir = tmp_path / "deep" / "state"
    with RuntimeRegistry(state_dir, "rt-a") as registry:
        registration = registry.register_project(tmp_path / "shop", hub_project="acme")
        with registry.open_store(registration, environ={}) as store:
            store.append_event("run-1", "run.started", {})
            store_files = sorted(registration.store_path.parent.iterdir())
            registry_files = sorted(state_dir.glob(REGISTRY_FILE + "*"))
            directories = [tmp_path / "deep", state_dir, registration.store_path.parent]
            assert {path: mode_of(path) for path in directories} == dict.fromkeys(
                directories, 0o700
            )
            names = {path.name for path in store_files + registry_files}
            assert {REGISTRY_FILE + "-wal", REGISTRY_FILE + "-shm"} <= names
            assert any(name.endswith(".sqlite-wal") for name in names)
            files = store_files + registry_files
            assert {path: mode_of(path) for path in files} == dict.fromkeys(files, 0o600)


@pytest.mark.usefixtures("permissive_umask")
def test_an_existing_state_dir_keeps_the_mode_its_owner_gave_it(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o750)
    with RuntimeRegistry(state_dir, "rt-a"):
        pass
    assert mode_of(state_dir) == 0o750
    assert mode_of(state_dir / REGISTRY_FILE) == 0o600


# ----- the runtime's enrollment -----

HUB = "hub-0123456789abcdef"


def enrollment_of(runtime_id: str = "rt-a", hub_id: str = HUB, *projects: str) -> Enrollment:
    return Enrollment(hub_id, runtime_id, projects or ("acme",), new_key())


def test_a_runtime_has_no_enrollment_until_it_joins_then_keeps_it(tmp_path: Path) -> None:
    given = enrollment_of()
    with RuntimeRegistry(tmp_path, "rt-a") as registry:
        assert registry.enrollment() is None
        assert registry.join(given) is JoinAction.JOINED
    with RuntimeRegistry(tmp_path, create=False) as reopened:
        assert reopened.enrollment() == given
    assert (tmp_path / REGISTRY_FILE).stat().st_mode & 0o777 == 0o600


def test_joining_with_the_same_token_again_changes_nothing(tmp_path: Path) -> None:
    given = enrollment_of()
    with RuntimeRegistry(tmp_path, "rt-a") as registry:
        registry.join(given)
        assert registry.join(given) is JoinAction.UNCHANGED
        assert registry.enrollment() == given


def test_a_newer_token_of_the_same_hub_replaces_the_key_and_hub_projects(tmp_path: Path) -> None:
    with RuntimeRegistry(tmp_path, "rt-a") as registry:
        registry.join(enrollment_of("rt-a", HUB, "acme"))
        newer = enrollment_of("rt-a", HUB, "acme", "beta")
        assert registry.join(newer) is JoinAction.UPDATED
        assert registry.enrollment() == newer


def test_a_token_for_another_runtime_is_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    foreign = enrollment_of("rt-b")
    with RuntimeRegistry(tmp_path, "rt-a") as registry:
        with pytest.raises(ForeignEnrollmentError, match="for runtime rt-b, but the state dir"):
            registry.join(foreign)
        assert registry.enrollment() is None


def test_a_token_of_another_hub_is_refused_and_the_first_hub_kept(tmp_path: Path) -> None:
    first = enrollment_of("rt-a", HUB)
    with RuntimeRegistry(tmp_path, "rt-a") as registry:
        registry.join(first)
        with pytest.raises(ForeignEnrollmentError, match=f"joined to hub {HUB}; this token is"):
            registry.join(enrollment_of("rt-a", "hub-fedcba9876543210"))
        assert registry.enrollment() == first


def test_a_refused_join_never_shows_the_key(tmp_path: Path) -> None:
    with RuntimeRegistry(tmp_path, "rt-a") as registry:
        registry.join(enrollment_of())
        for other in (enrollment_of("rt-b"), enrollment_of("rt-a", "hub-fedcba9876543210")):
            with pytest.raises(ForeignEnrollmentError) as info:
                registry.join(other)
            assert other.key.hex() not in str(info.value) and "key=" not in str(info.value)


def test_open_store_makes_paths_relative_to_the_registered_project_root(tmp_path: Path) -> None:
    root = tmp_path / "shop"
    with RuntimeRegistry(tmp_path / "state", "rt-a") as registry:
        registration = registry.register_project(root)
        with registry.open_store(registration, environ={}) as store:
            assert store.redactor.project_root == str(root.resolve())
            store.append_event(
                "run-1", "step.failed", {"error": {"message": f"in {root}/src/app.py and /etc/x"}}
            )
            payload = store.events("run-1")[0].payload
    assert "in src/app.py and [REDACTED:path]" in payload
    assert str(tmp_path) not in payload
