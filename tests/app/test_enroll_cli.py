"""Enrollment from the command line on a SQLite hub: ``hub init``, ``enroll`` (new key,
re-key, ``--revoke``) and ``runtime join``; and where the key may show up (the one token
output, the hub database, the runtime's registry) and nowhere else, with real processes."""

from __future__ import annotations

import base64
import functools
import json
import os
import subprocess
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from hubstore import hub_url_from_path, migrate_store, open_store
from hubstore.sqlite.schema import SCHEMA_VERSION
from hubsync.core.clock import format_timestamp
from hubsync.core.enrollment import TOKEN_PREFIX, Enrollment, decode_token
from hubsync.processes import run_hubsync
from producers.registry import REGISTRY_FILE, RuntimeRegistry
from tests.helpers.operator_support import CliRun, run_cli

Cli = Callable[..., CliRun]
"""``cli(*argv, stdin="")``: ``hubsync ARGV`` in-process (``run_cli``)."""


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    """``hubsync`` run in-process, its output captured."""
    return functools.partial(run_cli, capsys)


def ok(result: CliRun) -> CliRun:
    assert result.code == 0, result.err
    return result


@pytest.fixture
def hub_db(cli: Cli, tmp_path: Path) -> Path:
    """A hub database with its id."""
    path = tmp_path / "hub.db"
    ok(cli("hub", "init", "--hub-db", str(path)))
    return path


def enroll(
    cli: Cli, hub_db: Path, runtime_id: str, *args: str, projects: Sequence[str] = ("acme",)
) -> CliRun:
    """``hubsync enroll RUNTIME_ID --hub-db HUB --hub-project P... ARGS``, which must succeed."""
    hub_projects = [arg for project in projects for arg in ("--hub-project", project)]
    return ok(cli("enroll", runtime_id, "--hub-db", str(hub_db), *hub_projects, *args))


def enrolled(cli: Cli, hub_db: Path, runtime_id: str, *args: str) -> Enrollment:
    """The enrollment the token of ``enroll`` carries."""
    return decode_token(enroll(cli, hub_db, runtime_id, *args).out)


def secret_forms(key: bytes) -> list[str]:
    """The spellings a key could leak as."""
    return [
        key.hex(),
        base64.b64encode(key).decode().rstrip("="),
        base64.urlsafe_b64encode(key).decode().rstrip("="),
    ]


# ----- hub init -----


def test_hub_init_makes_the_hub_id_once_and_prints_it(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    first = ok(cli("hub", "init", "--hub-db", str(path)))
    hub_id = first.out.split("hub id ")[1].split()[0]
    assert first.out == f"hub store {path}: hub id {hub_id} (created)\n"
    again = json.loads(ok(cli("hub", "init", "--hub-url", hub_url_from_path(path), "--json")).out)
    assert (again["hub_id"], again["created"], again["schema"]["action"]) == (
        hub_id,
        False,
        "current",
    )
    assert path.stat().st_mode & 0o777 == 0o600
    with open_store(hub_url_from_path(path), create_schema=False) as store:
        assert store.hub_id() == hub_id


def test_hub_init_on_a_hub_without_an_id_gives_it_one(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    migrate_store(hub_url_from_path(path))  # a schema without an id, as an upgraded hub has
    document = json.loads(ok(cli("hub", "init", "--hub-db", str(path), "--json")).out)
    assert document["created"] is True and document["hub_id"].startswith("hub-")


def test_hub_migrate_gives_a_new_hub_its_id_once_so_enroll_follows_it(
    cli: Cli, tmp_path: Path
) -> None:
    path = tmp_path / "hub.db"
    first = ok(cli("hub", "migrate", "--hub-db", str(path)))
    created, made = first.out.splitlines()
    assert created == f"hub store {path}: created at schema version {SCHEMA_VERSION}"
    hub_id = made.removeprefix(f"hub store {path}: hub id ").removesuffix(" (created)")
    assert hub_id.startswith("hub-") and len(hub_id) == 20
    again = json.loads(ok(cli("hub", "migrate", "--hub-db", str(path), "--json")).out)
    assert (again["action"], again["hub_id"], again["hub_id_created"]) == ("current", hub_id, False)
    assert enrolled(cli, path, "rt-a").hub_id == hub_id
    init = ok(cli("hub", "init", "--hub-db", str(path)))
    assert f"hub id {hub_id} (already set; unchanged)" in init.out


def test_hub_migrate_gives_an_upgraded_hub_without_an_id_its_id(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    migrate_store(hub_url_from_path(path))
    document = json.loads(ok(cli("hub", "migrate", "--hub-db", str(path), "--json")).out)
    assert document["action"] == "current" and document["hub_id_created"] is True
    with open_store(hub_url_from_path(path), create_schema=False) as store:
        assert store.hub_id() == document["hub_id"]


# ----- enroll -----


def test_enroll_before_hub_init_is_refused_naming_hub_init(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    missing = cli("enroll", "rt-a", "--hub-db", str(path), "--hub-project", "acme")
    assert missing.code == 2 and "run `hubsync hub migrate --hub-url sqlite:///" in missing.err
    assert missing.out == ""
    migrate_store(hub_url_from_path(path))  # a schema without an id (hub migrate gives one)
    no_id = cli("enroll", "rt-a", "--hub-db", str(path), "--hub-project", "acme")
    assert no_id.code == 1 and no_id.out == ""
    assert "has no hub id yet; run `hubsync hub init" in no_id.err
    assert "Traceback" not in no_id.err


def test_enroll_prints_the_token_alone_on_stdout_and_how_to_join_on_stderr(
    cli: Cli, hub_db: Path
) -> None:
    result = enroll(cli, hub_db, "rt-a", projects=("beta", "acme"))
    assert result.out.count("\n") == 1 and result.out.startswith(TOKEN_PREFIX)
    enrollment = decode_token(result.out)
    assert (enrollment.runtime_id, enrollment.hub_projects) == ("rt-a", ("acme", "beta"))
    assert "hubsync runtime join --state-dir DIR -" in result.err
    assert "enrolled runtime rt-a on hub" in result.err
    assert TOKEN_PREFIX not in result.err
    with open_store(hub_url_from_path(hub_db), create_schema=False) as store:
        assert enrollment.hub_id == store.hub_id()
        record = store.enrolled_runtime("rt-a")
        assert record is not None and record.key == enrollment.key


def test_enroll_json_carries_the_token_in_a_field_named_token(cli: Cli, hub_db: Path) -> None:
    document = json.loads(enroll(cli, hub_db, "rt-a", "--json").out)
    enrollment = decode_token(document["token"])
    assert document["action"] == "enrolled" and document["runtime_id"] == "rt-a"
    assert document["hub_id"] == enrollment.hub_id and document["hub_projects"] == ["acme"]
    assert document["previous_key_valid_until"] is None


def test_enroll_needs_a_hub_project_and_a_valid_runtime_id(cli: Cli, hub_db: Path) -> None:
    none = cli("enroll", "rt-a", "--hub-db", str(hub_db))
    assert none.code == 2 and "--hub-project: missing" in none.err
    bad = cli("enroll", "rt {a}", "--hub-db", str(hub_db), "--hub-project", "acme")
    assert bad.code == 2 and "runtime id may hold only" in bad.err
    assert none.out == bad.out == ""


def test_enrolling_again_rotates_and_the_old_key_stays_valid_for_the_grace(
    cli: Cli, hub_db: Path
) -> None:
    first = enrolled(cli, hub_db, "rt-a")
    document = json.loads(enroll(cli, hub_db, "rt-a", "--rotation-grace", "2h", "--json").out)
    second = decode_token(document["token"])
    assert document["action"] == "rotated" and second.key != first.key
    with open_store(hub_url_from_path(hub_db), create_schema=False) as store:
        record = store.enrolled_runtime("rt-a")
    assert record is not None and record.rotated_at is not None
    rotated = record.rotated_at
    assert document["previous_key_valid_until"] == format_timestamp(rotated + timedelta(hours=2))
    assert record.keys_at(rotated + timedelta(minutes=119)) == (second.key, first.key)
    assert record.keys_at(rotated + timedelta(hours=2)) == (second.key,)


def test_revoke_erases_the_keys_and_a_second_revoke_changes_nothing(cli: Cli, hub_db: Path) -> None:
    enroll(cli, hub_db, "rt-a")
    first = ok(cli("enroll", "--revoke", "rt-a", "--hub-db", str(hub_db)))
    assert first.out == "revoked runtime rt-a: its keys are deleted from the hub store\n"
    again = json.loads(ok(cli("enroll", "--revoke", "rt-a", "--hub-db", str(hub_db), "--json")).out)
    assert again["action"] == "already_revoked"
    with open_store(hub_url_from_path(hub_db), create_schema=False) as store:
        record = store.enrolled_runtime("rt-a")
    assert record is not None and record.keys_at(record.enrolled_at) == ()
    assert again["revoked_at"] == format_timestamp(record.revoked_at)  # type: ignore[arg-type]
    unknown = cli("enroll", "--revoke", "rt-nobody", "--hub-db", str(hub_db))
    assert unknown.code == 2 and "never enrolled" in unknown.err
    with_project = cli("enroll", "--revoke", "rt-a", "--hub-db", str(hub_db), "--hub-project", "x")
    assert with_project.code == 2 and "not used with --revoke" in with_project.err


def test_enroll_output_writes_the_token_to_a_new_file_mode_0600_and_nothing_on_stdout(
    cli: Cli, hub_db: Path, tmp_path: Path
) -> None:
    token_file = tmp_path / "rt-a.token"
    previous = os.umask(0)  # the file's mode is hubsync's, not the umask's
    try:
        result = enroll(cli, hub_db, "rt-a", "--output", str(token_file))
    finally:
        os.umask(previous)
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert result.out == ""
    token = token_file.read_text()
    assert token.startswith(TOKEN_PREFIX) and token.count("\n") == 1
    assert decode_token(token).runtime_id == "rt-a"
    assert f"The token is in {token_file} (mode 0600) and nowhere else" in result.err
    assert "runtime join --state-dir DIR - < rt-a.token" in result.err
    assert token.strip().removeprefix(TOKEN_PREFIX)[:16] not in result.err


def test_enroll_output_with_json_names_the_file_instead_of_carrying_the_token(
    cli: Cli, hub_db: Path, tmp_path: Path
) -> None:
    token_file = tmp_path / "rt-a.token"
    document = json.loads(enroll(cli, hub_db, "rt-a", "--output", str(token_file), "--json").out)
    assert "token" not in document and document["token_file"] == str(token_file)
    assert document["hub_id"] == decode_token(token_file.read_text()).hub_id


def test_enroll_output_never_overwrites_a_file_and_then_changes_nothing(
    cli: Cli, hub_db: Path, tmp_path: Path
) -> None:
    token_file = tmp_path / "rt-a.token"
    token_file.write_text("an older token\n")
    result = cli(
        "enroll", "rt-a", "--hub-db", str(hub_db), "--hub-project", "acme", "-o", str(token_file)
    )
    assert result.code == 2 and result.out == ""
    assert result.err == (
        f"error: --output {token_file}: the file exists; a token file is never overwritten: "
        "remove it (shred -u: it may hold a key) or name a new file\n"
    )
    assert token_file.read_text() == "an older token\n"
    with open_store(hub_url_from_path(hub_db), create_schema=False) as store:
        assert store.enrolled_runtime("rt-a") is None, "refused before the hub changed"


def test_enroll_output_leaves_no_file_when_the_enrollment_fails(cli: Cli, tmp_path: Path) -> None:
    no_id = tmp_path / "no-id.db"
    migrate_store(hub_url_from_path(no_id))
    missing = tmp_path / "missing.db"
    for hub, code in ((no_id, 1), (missing, 2)):
        token_file = tmp_path / "rt-a.token"
        result = cli(
            "enroll",
            "rt-a",
            "--hub-db",
            str(hub),
            "--hub-project",
            "acme",
            "--output",
            str(token_file),
        )
        assert result.code == code, result.err
        assert len(result.err.splitlines()) == 1 and result.err.startswith("error: ")
        assert not token_file.exists()
    no_dir = cli(
        "enroll",
        "rt-a",
        "--hub-db",
        str(no_id),
        "--hub-project",
        "acme",
        "--output",
        str(tmp_path / "nowhere" / "t"),
    )
    assert no_dir.code == 2 and "cannot create it (No such file or directory)" in no_dir.err
    revoke = cli(
        "enroll", "--revoke", "rt-a", "--hub-db", str(no_id), "--output", str(tmp_path / "t")
    )
    assert revoke.code == 2 and "--output: not used with --revoke" in revoke.err
    assert not (tmp_path / "t").exists()


def test_hub_migrate_then_enroll_output_as_real_processes(tmp_path: Path) -> None:
    hub, token_file = tmp_path / "hub.db", tmp_path / "tok"
    migrated = run_hubsync(["hub", "migrate", "--hub-db", str(hub)])
    assert migrated.returncode == 0, migrated.stderr
    enrolled = run_hubsync(
        [
            "enroll",
            "rt-j",
            "--hub-db",
            str(hub),
            "--hub-project",
            "judge",
            "--output",
            str(token_file),
        ]
    )
    assert enrolled.returncode == 0, enrolled.stderr
    assert token_file.stat().st_mode & 0o777 == 0o600
    joined = run_hubsync(  # - < tok
        ["runtime", "join", "--state-dir", str(tmp_path / "rt"), "-"], stdin=token_file.read_text()
    )
    assert joined.returncode == 0, joined.stderr
    assert "runtime rt-j joined hub" in joined.stdout and joined.stderr == ""


# ----- runtime join -----


def test_join_from_stdin_keeps_the_enrollment_in_a_private_registry(
    cli: Cli, hub_db: Path, tmp_path: Path
) -> None:
    token = enroll(cli, hub_db, "rt-a").out
    state_dir = tmp_path / "runtime"
    result = ok(cli("runtime", "join", "--state-dir", str(state_dir), "-", stdin=token))
    assert f"created the state dir {state_dir} for runtime rt-a" in result.out
    assert "runtime rt-a joined hub" in result.out
    registry = state_dir / REGISTRY_FILE
    assert registry.stat().st_mode & 0o777 == 0o600
    with RuntimeRegistry(state_dir, create=False) as opened:
        assert opened.runtime_id == "rt-a"
        assert opened.enrollment() == decode_token(token)


def test_join_with_the_token_as_argument_then_a_rotated_one_replaces_the_key(
    cli: Cli, hub_db: Path, tmp_path: Path
) -> None:
    state_dir = tmp_path / "runtime"
    RuntimeRegistry(state_dir, "rt-a").close()  # the runtime existed before it was enrolled
    token = enroll(cli, hub_db, "rt-a").out
    join = ("runtime", "join", "--state-dir", str(state_dir))
    by_argument = ok(cli(*join, token.strip(), "--json"))
    joined = json.loads(by_argument.out)
    assert (joined["action"], joined["created_state_dir"]) == ("joined", False)
    assert by_argument.err == (
        "warning: the enrollment token (it holds the runtime's key) on the command line can be "
        "read in the shell history and, while this runs, by every user of this machine in the "
        "process list; pass - and give it on standard input instead (hubsync runtime join "
        "--state-dir DIR - < FILE)\n"
    )
    assert token.strip() not in by_argument.err
    by_stdin = ok(cli(*join, "-", "--json", stdin=token))
    assert json.loads(by_stdin.out)["action"] == "unchanged"
    assert by_stdin.err == "", "no warning for a token on standard input"
    rotated = enroll(cli, hub_db, "rt-a", projects=("acme", "beta")).out
    updated = json.loads(ok(cli(*join, "-", "--json", stdin=rotated)).out)
    assert (updated["action"], updated["hub_projects"]) == ("updated", ["acme", "beta"])
    with RuntimeRegistry(state_dir, create=False) as opened:
        assert opened.enrollment() == decode_token(rotated)


def test_join_refuses_another_runtimes_token_with_exit_2_and_never_echoes_it(
    cli: Cli, hub_db: Path, tmp_path: Path
) -> None:
    state_dir = tmp_path / "runtime"
    RuntimeRegistry(state_dir, "rt-a").close()
    token = enroll(cli, hub_db, "rt-b").out
    for how in ("-", token.strip()):
        result = cli(
            "runtime", "join", "--state-dir", str(state_dir), how, stdin=token if how == "-" else ""
        )
        assert result.code == 2
        assert "this enrollment token is for runtime rt-b, but the state dir" in result.err
        assert result.out == ""
        body = token.strip().removeprefix(TOKEN_PREFIX)
        for leak in (body, body[:16], body[-16:], *secret_forms(decode_token(token).key)):
            assert leak not in result.err
    with RuntimeRegistry(state_dir, create=False) as opened:
        assert opened.enrollment() is None


def test_join_refuses_a_token_of_another_hub(cli: Cli, hub_db: Path, tmp_path: Path) -> None:
    other_hub = tmp_path / "other.db"
    ok(cli("hub", "init", "--hub-db", str(other_hub)))
    state_dir = tmp_path / "runtime"
    first = enroll(cli, hub_db, "rt-a").out
    ok(cli("runtime", "join", "--state-dir", str(state_dir), "-", stdin=first))
    foreign = enroll(cli, other_hub, "rt-a").out
    result = cli("runtime", "join", "--state-dir", str(state_dir), "-", stdin=foreign)
    assert result.code == 2 and "A runtime syncs with one hub" in result.err
    with RuntimeRegistry(state_dir, create=False) as opened:
        assert opened.enrollment() == decode_token(first)


@pytest.mark.parametrize(
    "damage",
    [
        lambda t: t[: len(t) // 2],
        lambda t: t.replace(TOKEN_PREFIX, "hubsync-enroll-v9."),
        lambda t: t.removeprefix(TOKEN_PREFIX),
    ],
    ids=["truncated", "another format", "no prefix"],
)
def test_join_refuses_a_damaged_token_without_echoing_it(
    cli: Cli, hub_db: Path, tmp_path: Path, damage: object
) -> None:
    token = enroll(cli, hub_db, "rt-a").out.strip()
    bad = damage(token)  # type: ignore[operator]
    result = cli("runtime", "join", "--state-dir", str(tmp_path / "rt"), "-", stdin=bad)
    assert result.code == 2 and "enrollment token" in result.err
    body = token.removeprefix(TOKEN_PREFIX)
    assert body[:16] not in result.err and body[-16:] not in result.err
    assert not (tmp_path / "rt").exists(), "a refused token creates no state dir"


def test_join_of_an_empty_stdin_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    result = cli("runtime", "join", "--state-dir", str(tmp_path / "rt"), "-", stdin="")
    assert result.code == 2 and "standard input, which was empty" in result.err


# ----- where the key may be -----


def test_the_key_shows_only_in_the_one_token_output_the_hub_db_and_the_registry(
    tmp_path: Path,
) -> None:
    hub = tmp_path / "hub" / "hub.db"
    state_dir = tmp_path / "runtime"
    outputs: list[tuple[str, subprocess.CompletedProcess[str]]] = []

    # Real processes: what a leak scan must see is every byte a process writes and keeps.
    def step(name: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        """``hubsync ARGS`` as a real process, ``stdin`` fed to it, its output kept."""
        result = run_hubsync(args, stdin=stdin)
        outputs.append((name, result))
        return result

    step("init", "hub", "init", "--hub-db", str(hub))
    first = step("enroll", "enroll", "rt-a", "--hub-db", str(hub), "--hub-project", "acme")
    step("join", "runtime", "join", "--state-dir", str(state_dir), "-", stdin=first.stdout)
    step(
        "join again",
        "runtime",
        "join",
        "--state-dir",
        str(state_dir),
        "-",
        "--json",
        stdin=first.stdout,
    )
    second = step(
        "rotate", "enroll", "rt-a", "--hub-db", str(hub), "--hub-project", "acme", "--json"
    )
    second_token = json.loads(second.stdout)["token"]
    step("rejoin", "runtime", "join", "--state-dir", str(state_dir), "-", stdin=second_token)
    RuntimeRegistry(tmp_path / "rt-b", "rt-b").close()
    step(
        "refused", "runtime", "join", "--state-dir", str(tmp_path / "rt-b"), "-", stdin=first.stdout
    )
    step("revoke", "enroll", "--revoke", "rt-a", "--hub-db", str(hub), "--json")
    step("hub init again", "hub", "init", "--hub-db", str(hub), "--json")

    tokens = {"first": first.stdout.strip(), "second": second_token}
    keys = {which: decode_token(token).key for which, token in tokens.items()}
    for which, key in keys.items():
        carried_by = "enroll" if which == "first" else "rotate"
        # the token itself (its body holds the key, encoded), or the key in any spelling
        forms = [tokens[which].removeprefix(TOKEN_PREFIX), *secret_forms(key)]
        for name, result in outputs:
            for stream, text in (("stdout", result.stdout), ("stderr", result.stderr)):
                shown = any(form in text for form in forms)
                expected = name == carried_by and stream == "stdout"
                assert shown == expected, f"the {which} key in {name}'s {stream}"
    # At rest: the hub keeps the verification key until revoked; the runtime keeps the
    # key it signs with. No other file (backups, other state dirs) holds either.
    holders = {
        str(path.relative_to(tmp_path))
        for path in tmp_path.rglob("*")
        if path.is_file() and any(key in path.read_bytes() for key in keys.values())
    }
    assert holders <= {
        "hub/hub.db",
        "hub/hub.db-wal",
        "runtime/registry.sqlite",
        "runtime/registry.sqlite-wal",
    }
    assert any(h.startswith("runtime/registry.sqlite") for h in holders)
