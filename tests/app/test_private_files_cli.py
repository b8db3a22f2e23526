"""The files holding keys, as real ``hubsync`` processes see them: ``runtime join`` never writes
its key through a link, a registry or hub database open to others is tightened and the true mode
printed, a link in a sidecar's place stops the command by name; and the rotation grace has a
maximum (a usage error beyond it, the hub left as it was)."""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from hubstore import hub_url_from_path, open_store
from hubsync.processes import run_hubsync
from producers.registry import REGISTRY_FILE


def hubsync(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``hubsync ARGS`` as a child process, run to its end."""
    return run_hubsync(args, stdin=stdin, timeout=60)


def mode(path: Path) -> int:
    return path.lstat().st_mode & 0o777


def only_error(result: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused command prints on stderr: ``error: ...``, no traceback."""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: "), result.stderr
    return line


def everything_under(directory: Path) -> set[str]:
    return {str(path.relative_to(directory)) for path in directory.rglob("*")}


@pytest.fixture
def hub_db(tmp_path: Path) -> Path:
    path = tmp_path / "hub" / "hub.db"
    path.parent.mkdir()
    assert hubsync("hub", "init", "--hub-db", str(path)).returncode == 0
    return path


def enroll(hub_db: Path, runtime_id: str = "rt-a", *args: str) -> subprocess.CompletedProcess[str]:
    """``hubsync enroll RUNTIME_ID`` for hub project acme on ``hub_db``, with ``args``."""
    return hubsync("enroll", runtime_id, "--hub-db", str(hub_db), "--hub-project", "acme", *args)


def token(hub_db: Path, runtime_id: str = "rt-a", *args: str) -> str:
    """The enrollment token ``hubsync enroll`` prints for ``runtime_id``."""
    enrolled = enroll(hub_db, runtime_id, *args)
    assert enrolled.returncode == 0, enrolled.stderr
    return enrolled.stdout


def test_join_refuses_a_dangling_registry_link_and_writes_nothing_outside_the_state_dir(
    hub_db: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    registry = state_dir / REGISTRY_FILE
    registry.symlink_to(elsewhere / "key.sqlite")
    before = everything_under(tmp_path)

    result = hubsync("runtime", "join", "--state-dir", str(state_dir), "-", stdin=token(hub_db))

    assert result.returncode == 1, result.stderr
    line = only_error(result)
    assert f"{registry} is a symbolic link (to {elsewhere / 'key.sqlite'})" in line
    assert everything_under(tmp_path) == before and registry.is_symlink()
    assert list(elsewhere.iterdir()) == []


def test_join_tightens_a_registry_open_to_others_and_prints_its_true_mode(
    hub_db: Path, tmp_path: Path
) -> None:
    state_dir = tmp_path / "state"
    first = hubsync("runtime", "join", "--state-dir", str(state_dir), "-", stdin=token(hub_db))
    assert first.returncode == 0, first.stderr
    registry = state_dir / REGISTRY_FILE
    registry.chmod(0o644)

    again = hubsync("runtime", "join", "--state-dir", str(state_dir), "-", stdin=token(hub_db))

    assert again.returncode == 0, again.stderr
    assert again.stderr == (
        f"{registry} was mode 0644 (group or others could read it); tightened it to 0600\n"
    )
    assert f"(kept in {registry}, mode 0600)" in again.stdout
    assert mode(registry) == 0o600


def test_enroll_tightens_a_hub_database_open_to_others_saying_its_mode(
    hub_db: Path, tmp_path: Path
) -> None:
    hub_db.chmod(0o640)
    result = enroll(hub_db)
    assert result.returncode == 0, result.stderr
    assert f"{hub_db} was mode 0640 (group or others could read it); tightened it to 0600" in (
        result.stderr.splitlines()
    )
    assert mode(hub_db) == 0o600


@pytest.mark.parametrize("sidecar", ["-wal", "-shm"])
def test_a_link_in_the_place_of_the_hub_databases_sidecar_stops_enroll_by_name(
    hub_db: Path, tmp_path: Path, sidecar: str
) -> None:
    linked = hub_db.with_name(hub_db.name + sidecar)
    linked.unlink(missing_ok=True)
    linked.symlink_to(tmp_path / "outside")

    result = enroll(hub_db)

    assert result.returncode == 1, result.stderr
    assert f"{linked} is a symbolic link (to {tmp_path / 'outside'})" in only_error(result)
    assert result.stdout == "" and not (tmp_path / "outside").exists()


@pytest.mark.parametrize("grace", ["30d1s", "31d", "999999999d", "9" * 400])
def test_a_rotation_grace_beyond_30_days_is_one_usage_line_and_changes_nothing(
    hub_db: Path, grace: str
) -> None:
    token(hub_db)  # enrolled: a second enroll would rotate
    with open_store(hub_url_from_path(hub_db), create_schema=False) as store:
        before = store.enrolled_runtime("rt-a")

    result = enroll(hub_db, "rt-a", "--rotation-grace", grace)

    assert result.returncode == 2, result.stderr
    assert only_error(result).startswith("error: --rotation-grace: ")
    assert result.stdout == ""
    with open_store(hub_url_from_path(hub_db), create_schema=False) as store:
        assert store.enrolled_runtime("rt-a") == before


def test_a_rotation_grace_of_30_days_is_taken(hub_db: Path) -> None:
    token(hub_db)
    rotated = enroll(hub_db, "rt-a", "--rotation-grace", "30d")
    assert rotated.returncode == 0, rotated.stderr
    with open_store(hub_url_from_path(hub_db), create_schema=False) as store:
        record = store.enrolled_runtime("rt-a")
    assert record is not None and record.rotated_at and record.previous_valid_until
    assert record.previous_valid_until - record.rotated_at == timedelta(days=30)
