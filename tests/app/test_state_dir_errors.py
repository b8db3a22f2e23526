"""A state dir that cannot be made, a damaged registry and a mistyped path: each is one
``error:`` line naming the path and what to do, a documented exit code, and nothing on disk."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pytest

from hubsync.cli import exit_codes
from producers.registry import REGISTRY_FILE, RuntimeRegistry
from tests.helpers.operator_support import CliRun, run_cli

UNREACHABLE = "redis://127.0.0.1:1/0"

Cli = Callable[..., CliRun]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    """``hubsync`` run in-process, its output captured."""
    return functools.partial(run_cli, capsys)


def one_error_line(result: CliRun) -> str:
    """The single ``error:`` line a refused command prints (and nothing else on stderr)."""
    assert "Traceback" not in result.err
    [line] = result.err.splitlines()
    assert line.startswith("error: ")
    return line


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` with its bytes, and every directory (as b"")."""
    return {
        str(path.relative_to(directory)): path.read_bytes() if path.is_file() else b""
        for path in sorted(directory.rglob("*"))
    }


def token_for(cli: Cli, tmp_path: Path, runtime_id: str) -> str:
    """An enrollment token of ``runtime_id`` from a real hub database (``hub init``, ``enroll``)."""
    hub_db = str(tmp_path / "hub.db")
    assert cli("hub", "init", "--hub-db", hub_db).code == 0
    enrolled = cli("enroll", runtime_id, "--hub-db", hub_db, "--hub-project", "acme")
    assert enrolled.code == 0, enrolled.err
    return enrolled.out.strip()


# ----- a state dir this user cannot create -----

UNWRITABLE = {
    # /sys refuses mkdir even to root (EPERM, a PermissionError); /proc has no such entry
    "permission denied": lambda tmp: Path("/sys/hubsync-test-state/rt"),
    "missing under /proc": lambda tmp: Path("/proc/hubsync-test-state/rt"),
    "a file on the path": lambda tmp: tmp / "a-file" / "rt",
}


@pytest.mark.parametrize("where", sorted(UNWRITABLE))
@pytest.mark.parametrize("command", ["produce", "runtime join"])
def test_a_state_dir_that_cannot_be_created_is_one_line_exit_2_and_creates_nothing(
    cli: Cli, tmp_path: Path, where: str, command: str
) -> None:
    (tmp_path / "a-file").write_text("not a directory\n")
    state_dir = UNWRITABLE[where](tmp_path)
    if command == "produce":
        argv = ["produce", "--state-dir", str(state_dir), "--project-root", str(tmp_path / "p")]
        argv += ["--runs", "1", "--events-per-run", "1", "--create"]
    else:
        token = token_for(cli, tmp_path, "rt-a")
        argv = ["runtime", "join", "--state-dir", str(state_dir), token]
    before = snapshot(tmp_path)

    result = cli(*argv)

    assert result.code == exit_codes.USAGE, result.err
    line = one_error_line(result)
    assert str(state_dir / REGISTRY_FILE) in line and "give --state-dir a directory" in line
    assert result.out == ""
    assert not state_dir.exists()
    assert snapshot(tmp_path) == before


# ----- a registry that is not a database -----


@pytest.fixture
def damaged_state_dir(tmp_path: Path) -> Path:
    """A state dir whose registry.sqlite holds text, not a SQLite database."""
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / REGISTRY_FILE).write_text("not a database\n")
    (state_dir / REGISTRY_FILE).chmod(0o600)  # private, as hubsync makes it: its bytes are bad
    return state_dir


DAMAGED_COMMANDS = {
    "relay --once": ["relay", "--once"],
    "relay": ["relay"],
    "relay --check": ["relay", "--check"],
    "status": ["status"],
    "produce": ["produce", "--runs", "1", "--events-per-run", "1"],
    "runtime join": ["runtime", "join"],
}


@pytest.mark.parametrize("reachable", [True, False], ids=["redis", "no-redis"])
@pytest.mark.parametrize("command", sorted(DAMAGED_COMMANDS))
def test_a_damaged_registry_is_one_line_naming_it_exit_1_and_left_untouched(
    cli: Cli, damaged_state_dir: Path, redis_url: str, command: str, reachable: bool
) -> None:
    argv = [*DAMAGED_COMMANDS[command], "--state-dir", str(damaged_state_dir)]
    if command == "produce":
        argv += ["--project-root", str(damaged_state_dir.parent / "p")]
    if command == "runtime join":
        argv += [token_for(cli, damaged_state_dir.parent, "rt-a")]
    before = snapshot(damaged_state_dir.parent)

    result = cli(*argv, env={"HUBSYNC_REDIS_URL": redis_url if reachable else UNREACHABLE})

    assert result.code == exit_codes.FAILURE, result.err
    line = one_error_line(result)
    assert str(damaged_state_dir / REGISTRY_FILE) in line
    assert "not a readable SQLite database" in line and "restore it from a backup" in line
    assert snapshot(damaged_state_dir.parent) == before


# ----- a state dir that does not exist: only join or produce --create makes one -----


def test_produce_without_create_refuses_a_missing_state_dir_and_creates_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    typo = tmp_path / "typo" / "rt"
    argv = ["produce", "--state-dir", str(typo), "--project-root", str(tmp_path / "p")]

    result = cli(*argv, "--runs", "1", "--events-per-run", "1")

    assert result.code == exit_codes.USAGE
    line = one_error_line(result)
    assert str(typo) in line and "hubsync runtime join" in line and "--create" in line
    assert not (tmp_path / "typo").exists()
    assert not (tmp_path / "p").exists()


def test_an_existing_dir_without_a_registry_is_refused_too(cli: Cli, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    argv = ["produce", "--state-dir", str(empty), "--project-root", str(tmp_path / "p")]

    result = cli(*argv, "--runs", "1", "--events-per-run", "1")

    assert result.code == exit_codes.USAGE
    assert "not a hubsync state dir" in one_error_line(result)
    assert list(empty.iterdir()) == []


def test_produce_create_makes_the_runtime_where_a_join_failed(cli: Cli, tmp_path: Path) -> None:
    state_dir = tmp_path / "new"
    refused = cli("runtime", "join", "--state-dir", str(state_dir), "not-a-token")
    assert refused.code == exit_codes.USAGE
    one_error_line(refused)
    assert not state_dir.exists()

    argv = ["produce", "--state-dir", str(state_dir), "--project-root", str(tmp_path / "p")]
    made = cli(*argv, "--runtime-id", "rt-j", "--runs", "1", "--events-per-run", "1", "--create")

    assert made.code == 0, made.err
    with RuntimeRegistry(state_dir, create=False) as registry:
        assert registry.runtime_id == "rt-j"
        [project] = registry.projects()
    assert project.project_root == (tmp_path / "p").resolve()
    again = cli(*argv, "--runs", "1", "--events-per-run", "1")  # now it exists: no --create needed
    assert again.code == 0, again.err
    assert "2 pending" in again.out


def test_a_project_store_that_is_not_a_database_is_one_line_in_produce(
    cli: Cli, tmp_path: Path
) -> None:
    state_dir = tmp_path / "state"
    argv = ["produce", "--state-dir", str(state_dir), "--project-root", str(tmp_path / "p")]
    argv += ["--runs", "1", "--events-per-run", "1"]
    assert cli(*argv, "--create").code == 0
    with RuntimeRegistry(state_dir, create=False) as registry:
        [project] = registry.projects()
    for companion in ("-wal", "-shm"):
        Path(f"{project.store_path}{companion}").unlink(missing_ok=True)
    project.store_path.write_text("not a database\n")
    before = snapshot(state_dir)

    result = cli(*argv)

    assert result.code == exit_codes.FAILURE
    line = one_error_line(result)
    assert f"project {project.project_id}: {project.store_path}: file is not a database" in line
    assert "restore the file from a backup" in line
    assert snapshot(state_dir) == before
